"""The storage node daemon, mooncake_client, as a user runs it: bad flags and sizes refused with a
message and exit code 2, --version, its segment mounted at a real master and unmounted on
SIGTERM, /health and /metrics (Prometheus text that promtool accepts), a taken port, a master
that is not there, and garbage on its control socket answered while it keeps serving."""

import json
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest
from node_helpers import Node, dummy_setup, node_port, run_client
from store_helpers import wait_for

import mooncake


@pytest.mark.parametrize("flags, needle", [
    (["--bogus"], "unknown flag 'bogus'"),
    (["--global_segment_size=4x"], "--global_segment_size"),
    (["--local_buffer_size=-1"], "--local_buffer_size"),
    (["--global_segment_size=0"], "--global_segment_size must be more than 0"),
    (["--port=0"], "--port must be in 1..65535"),
    (["--port=70000"], "--port must be in 1..65535"),
    (["--threads=0"], "--threads"),
    (["--enable_offload"], "--enable_offload needs --root_fs_dir"),
    (["positional"], "unexpected argument"),
])
def test_bad_flags_exit_2_with_a_message(flags, needle):
    r = run_client(*flags)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr
    assert "mooncake_client" in r.stderr


def test_version_and_help():
    r = run_client("--version")
    assert r.returncode == 0
    assert r.stdout.split() == ["mooncake_client", mooncake.__version__]
    r = run_client("--help")
    assert r.returncode == 0
    for flag in ("--global_segment_size", "--local_buffer_size", "--master_server_address",
                 "--metadata_server", "--protocol", "--device_name", "--host", "--port",
                 "--threads", "--enable_http_server", "--http_port"):
        assert flag in r.stdout, flag


def test_sizes_as_strings(make_master):
    master = make_master()
    node = Node(master, segment="4 MB")  # the reference's spelling, with a space
    try:
        segs = json.loads(master.http("/json/get_all_segments"))
        assert [s["size"] for s in segs if s["name"] == node.segment] == [4 << 20]
    finally:
        node.stop()


def test_master_unreachable_fails_clearly(make_master):
    master = make_master()
    dead = master.addr
    master.stop()
    r = run_client(f"--master_server_address={dead}", "--host=127.0.0.1",
                   "--metadata_server=P2PHANDSHAKE", "--global_segment_size=4mb",
                   f"--port={node_port()}")
    assert r.returncode == 1
    assert "cannot join the pool at master" in r.stderr


def test_port_taken_fails_clearly(make_master):
    master = make_master()
    node = Node(master, segment="4mb")
    try:
        r = run_client(f"--master_server_address={master.addr}", "--host=127.0.0.1",
                       "--metadata_server=P2PHANDSHAKE", "--global_segment_size=4mb",
                       f"--port={node.port}")
        assert r.returncode == 1
        assert "another mooncake_client" in r.stderr
        assert node.proc.poll() is None
    finally:
        node.stop()


def test_sigterm_unmounts(make_master):
    master = make_master()
    node = Node(master, segment="8mb")
    names = [s["name"] for s in json.loads(master.http("/json/get_all_segments"))]
    assert node.segment in names
    assert node.stop(signal.SIGTERM) == 0
    # Unmounted before it exited: no client_ttl wait.
    names = [s["name"] for s in json.loads(master.http("/json/get_all_segments"))]
    assert node.segment not in names
    assert any("unmounting" in line for line in node.lines)


def test_health_and_metrics(make_master, make_worker):
    master = make_master()
    node = Node(master, segment="16mb", http=True)
    try:
        status, body = node.http("/health")
        assert status == 200 and json.loads(body) == {"status": "healthy", "code": 0}
        w = make_worker()
        dummy_setup(w, node)
        assert w.run("result = store.put('metric-key', pattern(100000, 1))") == 0
        assert w.run("result = len(store.get('metric-key'))") == 100000
        status, text = node.http("/metrics")
        assert status == 200
        for name in ("mooncake_transfer_write_bytes", "mooncake_transfer_read_bytes",
                     "mooncake_transfer_put_latency_bucket", "mooncake_client_rpc_count",
                     "mooncake_client_dummy_clients", "mooncake_client_global_segment_bytes"):
            assert name in text, name
        assert node.metric("mooncake_transfer_write_bytes") == 100000
        assert node.metric("mooncake_transfer_read_bytes") == 100000
        assert node.metric("mooncake_client_dummy_clients") == 1
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=30)
            assert r.returncode == 0, r.stdout + r.stderr
        try:
            node.http("/nope")
            raise AssertionError("404 expected")
        except Exception as exc:  # urllib raises HTTPError for 404
            assert "404" in str(exc)
        # The master gone: the node says so.
        master.stop(signal.SIGKILL)
        assert wait_for(lambda: node.metric("mooncake_client_master_healthy") == 0, timeout=10)
    finally:
        node.stop(signal.SIGKILL)


def _frame(typ, body, magic=0x314B434D, version=1, body_len=None):
    n = len(body) if body_len is None else body_len
    return struct.pack("<IBBHQQ", magic, version, typ, 0, 1, n) + body


def _reply(sock):
    hdr = b""
    while len(hdr) < 24:
        try:
            chunk = sock.recv(24 - len(hdr))
        except ConnectionResetError:  # closed with our unread bytes still queued
            return None
        if not chunk:
            return None
        hdr += chunk
    _, _, _, flags, _, n = struct.unpack("<IBBHQQ", hdr)
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return flags, body


def test_garbage_on_the_control_socket(make_master, make_worker):
    master = make_master()
    node = Node(master, segment="16mb")
    try:
        w = make_worker()
        dummy_setup(w, node)
        assert w.run("result = store.put('before-garbage', b'x' * 1000)") == 0
        cases = [
            (_frame(6, struct.pack("<I", 10**6)), b"count", True),          # lying item count
            (_frame(99, b""), b"unknown request type", True),                # unknown type
            (_frame(12, b"\x00"), b"trailing", True),                        # trailing bytes
            (_frame(4, b"", body_len=1 << 30), b"16 MiB limit", False),      # oversized
            (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"not a Mooncake frame", False),
            (_frame(1, b"", version=9), b"unknown protocol version", False),
        ]
        for data, needle, stays_open in cases:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(node.socket_name)
            s.sendall(data)
            flags, body = _reply(s)
            assert flags & 0x2, data  # an error reply
            assert needle in body, (needle, body)
            if stays_open:  # the framing held: the next request is served
                s.sendall(_frame(12, b""))
                flags, body = _reply(s)
                assert not flags & 0x2 and struct.unpack("<q", body[:8])[0] == 0
            else:
                assert _reply(s) is None
            s.close()
        # A client that connects and vanishes half-way through a frame.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(node.socket_name)
        s.sendall(_frame(7, b"", body_len=100)[:30])
        s.close()
        assert node.proc.poll() is None
        assert w.run("result = store.get('before-garbage') == b'x' * 1000") is True
        assert w.run("result = store.put('after-garbage', b'y' * 10)") == 0
    finally:
        node.stop(signal.SIGKILL)


def _wait_like_sglang(host, port, proc, timeout=90):
    """SGLang's MooncakeTestServices._wait_for_store: the node is ready once a TCP connection to
    (--host, --port) succeeds; a node that exited is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mooncake_client exited"
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError("Timed out waiting for Mooncake store")


def test_service_port_over_tcp(make_master, make_worker):
    """The reference's real-client service port: the node's channel over TCP on --host:--port,
    what SGLang's fixture waits for; requests that need a dummy's shared memory are refused
    there, the others served, garbage answered, and dummies on the unix socket unaffected."""
    master = make_master()
    node = Node(master, segment="16mb")
    try:
        _wait_like_sglang("127.0.0.1", node.port, node.proc)
        w = make_worker()
        dummy_setup(w, node)
        assert w.run("result = store.put('over-tcp', b'z' * 100)") == 0
        s = socket.create_connection(("127.0.0.1", node.port), timeout=10)
        s.sendall(_frame(12, b""))  # HEALTH
        flags, body = _reply(s)
        assert not flags & 0x2 and struct.unpack("<q", body[:8])[0] == 0
        s.sendall(_frame(99, b""))  # an unknown type: an error reply, the connection goes on
        flags, body = _reply(s)
        assert flags & 0x2 and b"unknown request type" in body
        s.sendall(_frame(2, b""))  # MAP: no memory can come over TCP
        flags, body = _reply(s)
        assert flags & 0x2
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" + b"\0" * 8)  # not our framing: answered, closed
        flags, body = _reply(s)
        assert flags & 0x2 and b"not a Mooncake frame" in body
        assert _reply(s) is None
        s.close()
        assert node.proc.poll() is None
        assert w.run("result = store.get('over-tcp') == b'z' * 100") is True
    finally:
        node.stop(signal.SIGKILL)
