"""A real transfer through the installed wheel: two processes, two TransferEngines, TCP on loopback.

Written against the reference Mooncake API (initialize with P2PHANDSHAKE, allocate_managed_buffer,
get_rpc_port, transfer_sync_write/read, write_bytes_to_buffer, read_bytes_from_buffer).
"""

import hashlib
import json
import os
import subprocess
import sys

SIZE = 4 << 20

_TARGET = r"""
import hashlib, json, sys
from mooncake.engine import TransferEngine
te = TransferEngine()
rc = te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
if rc != 0:
    print(json.dumps({"error": f"initialize -> {rc}"}), flush=True); sys.exit(1)
n = int(sys.argv[1])
buf = te.allocate_managed_buffer(n)
if not buf:
    print(json.dumps({"error": "allocate_managed_buffer -> 0"}), flush=True); sys.exit(1)
if te.write_bytes_to_buffer(buf, b"\xee" * n, n) != 0:
    print(json.dumps({"error": "write_bytes_to_buffer failed"}), flush=True); sys.exit(1)
print(json.dumps({"port": te.get_rpc_port(), "buf": buf}), flush=True)
for line in sys.stdin:                       # each line: "digest" -> sha256 of the whole buffer
    data = te.read_bytes_from_buffer(buf, n)
    print(json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "len": len(data)}), flush=True)
"""


class Target:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-c", _TARGET, str(SIZE)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, MC_FORCE_TCP="1"))

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            self.p.kill()
            raise AssertionError(f"target died: exit {self.p.wait(10)}: {self.p.stderr.read()[-2000:]}")
        msg = json.loads(line)
        assert "error" not in msg, msg
        return msg

    def digest(self):
        self.p.stdin.write("digest\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=20)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()


def test_loopback_write_then_read_between_two_processes():
    from mooncake.engine import TransferEngine

    target = Target()
    try:
        hello = target.read()
        port, peer_buf = hello["port"], hello["buf"]
        assert isinstance(port, int) and 0 < port < 65536
        assert peer_buf != 0

        te = TransferEngine()
        assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        src = te.allocate_managed_buffer(SIZE)
        dst = te.allocate_managed_buffer(SIZE)
        assert src and dst
        payload = os.urandom(SIZE)
        assert te.write_bytes_to_buffer(src, payload, SIZE) == 0
        assert te.read_bytes_from_buffer(src, SIZE) == payload

        peer = f"127.0.0.1:{port}"
        assert te.transfer_sync_write(peer, src, peer_buf, SIZE) == 0
        got = target.digest()
        assert got == {"sha256": hashlib.sha256(payload).hexdigest(), "len": SIZE}

        assert te.transfer_sync_read(peer, dst, peer_buf, SIZE) == 0
        assert te.read_bytes_from_buffer(dst, SIZE) == payload

        # A request outside the peer's registered memory fails cleanly and leaves the peer serving.
        assert te.transfer_sync_write(peer, src, 0x1000, SIZE) < 0
        assert target.digest()["sha256"] == hashlib.sha256(payload).hexdigest()
    finally:
        target.close()
