"""A real etcd on loopback for the tests that use ``etcd://`` metadata: ephemeral ports, a
temporary data dir, stopped at the end. The binary is $MC_ETCD_BIN or ``etcd`` on PATH (Debian's
etcd-server package); keys are read back through etcd's JSON gateway, not through our client."""

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_binary():
    return os.environ.get("MC_ETCD_BIN") or shutil.which("etcd")


class Etcd:
    def __init__(self):
        binary = etcd_binary()
        if not binary:
            raise RuntimeError("no etcd binary: install etcd-server or set MC_ETCD_BIN")
        self.dir = tempfile.mkdtemp(prefix="mc-etcd-")
        self.port, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"t={peer_url}", "--log-level", "error"],
            stdout=self.log, stderr=self.log)
        self.endpoint = f"127.0.0.1:{self.port}"
        self.url = f"etcd://{self.endpoint}"
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(client_url + "/health", timeout=1) as r:
                    if b"true" in r.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("etcd did not become healthy")
            time.sleep(0.05)

    def _call(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def get(self, key: str):
        """The key's kv (value decoded, lease as int), or None."""
        kvs = self._call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = kvs.get("kvs", [])
        if not kvs:
            return None
        kv = kvs[0]
        return {"value": base64.b64decode(kv.get("value", "")),
                "lease": int(kv.get("lease", 0))}

    def keys(self, prefix: str):
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self._call("/v3/kv/range", {"key": base64.b64encode(prefix.encode()).decode(),
                                        "range_end": base64.b64encode(end.encode()).decode(),
                                        "keys_only": True})
        return sorted(base64.b64decode(kv["key"]).decode() for kv in r.get("kvs", []))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
