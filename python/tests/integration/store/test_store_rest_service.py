"""The store's REST service (mooncake.mooncake_store_service, mc_store_rest_server) as a real
process: a real mooncake_master, the server started as its console script runs it, and real HTTP
requests over loopback. Every route, then bad input: each gets a clear 4xx with a JSON message,
the server keeps serving, and nothing a refused request carried becomes readable."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from store_helpers import Master, wait_for

MAX_BODY = 1 << 20  # the server's --max-body-size in these tests


def server_cmd(*args):
    return [sys.executable, "-m", "mooncake.mooncake_store_service", *args]


class RestServer:
    """mc_store_rest_server on 127.0.0.1, an ephemeral port, against master."""

    def __init__(self, master_addr, *extra, wait=True):
        self.lines = []
        self.proc = subprocess.Popen(
            server_cmd("--host", "127.0.0.1", "--port", "0", "--max-wait-time", "10",
                       "--max-body-size", str(MAX_BODY),
                       f"-Dmaster_server_address={master_addr}", "-Dlocal_hostname=127.0.0.1",
                       "-Dmetadata_server=P2PHANDSHAKE", "-Dglobal_segment_size=64mb",
                       "-Dlocal_buffer_size=16mb", "-Dprotocol=tcp", *extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if wait:
            assert wait_for(lambda: self.port is not None or self.proc.poll() is not None, 20)
            assert self.port, "server did not start:\n" + "".join(self.lines)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"REST API started on [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))

    def request(self, method, path, body=None, headers=None, timeout=10):
        """(status, content type, body bytes); a dict body is sent as JSON."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.getheader("Content-Type", ""), r.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, **kw):
        status, ctype, data = self.request(method, path, body, **kw)
        assert ctype.startswith("application/json"), (status, ctype, data)
        return status, json.loads(data)

    def alive(self):
        return self.proc.poll() is None and self.json("GET", "/api/health")[0] == 200

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


@pytest.fixture(scope="module")
def master():
    m = Master()
    yield m
    m.stop()


@pytest.fixture(scope="module")
def server(master):
    s = RestServer(master.addr)
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


def key():
    return f"rest-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def shm_file():
    name = f"mc-rest-test-{uuid.uuid4().hex[:8]}"
    path = f"/dev/shm/{name}"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 8 << 20)
    os.close(fd)
    yield name, path
    os.unlink(path)


# ---- every route ---------------------------------------------------------------------------------

def test_put_get_exist_remove_round_trip(server):
    k = key()
    value = "héllo wörld ✓ " * 100
    assert server.json("PUT", "/api/put", {"key": k, "value": value}) == (200, {"status": "success"})
    status, ctype, data = server.request("GET", f"/api/get/{k}")
    assert (status, ctype) == (200, "application/octet-stream")
    assert data == value.encode()
    assert server.json("GET", f"/api/exist/{k}") == (200, {"exists": True})
    # A read leaves a lease: removing without force waits for it to end.
    assert wait_for(lambda: server.json("DELETE", f"/api/remove/{k}")[0] == 200, 30, 0.5)
    assert server.json("GET", f"/api/exist/{k}") == (200, {"exists": False})
    assert server.json("GET", f"/api/get/{k}") == (404, {"error": "Key not found"})


def test_missing_key_answers(server):
    k = key()
    assert server.json("GET", f"/api/get/{k}") == (404, {"error": "Key not found"})
    assert server.json("GET", f"/api/exist/{k}") == (200, {"exists": False})
    status, body = server.json("DELETE", f"/api/remove/{k}")
    assert status == 404 and body["error"] == "Key not found"


def test_remove_all_counts_the_keys(master):
    s = RestServer(master.addr)  # its own store, so no other test's keys are counted
    try:
        keys = [key() for _ in range(5)]
        for k in keys:
            assert s.json("PUT", "/api/put", {"key": k, "value": k})[0] == 200
        # Nothing was read, so no key holds a lease.
        assert s.json("DELETE", "/api/remove_all") == (200, {"status": "success removed 5 keys"})
        for k in keys:
            assert s.json("GET", f"/api/exist/{k}") == (200, {"exists": False})
        assert s.json("DELETE", "/api/remove_all") == (200, {"status": "success removed 0 keys"})
    finally:
        assert s.stop() == 0


def test_mount_and_unmount_allocated_segment(server):
    status, body = server.json("POST", "/api/mount", {"size": 4 << 20, "protocol": "tcp"})
    assert status == 200, body
    assert body["status"] == "success" and body["allocated_size"] == 4 << 20
    (sid,) = body["segment_ids"]
    uuid.UUID(sid)
    assert server.json("POST", "/api/unmount", {"segment_ids": sid}) == (200, {"status": "success"})
    # It is gone: a second unmount names the segment as unknown.
    status, body = server.json("POST", "/api/unmount", {"segment_ids": [sid]})
    assert status == 404 and "segment not found" in body["error"], body


def test_mount_shm_and_unmount_shm(server, shm_file):
    name, _ = shm_file
    status, body = server.json("POST", "/api/mount_shm", {"name": name, "size": 4 << 20})
    assert status == 200, body
    (sid,) = body["segment_ids"]
    # The new segment takes objects: a put lands somewhere and reads back.
    k = key()
    assert server.json("PUT", "/api/put", {"key": k, "value": "on shm"})[0] == 200
    assert server.request("GET", f"/api/get/{k}")[2] == b"on shm"
    status, body = server.json("POST", "/api/unmount_shm",
                               {"segment_ids": [sid], "grace_period_seconds": 0})
    assert (status, body) == (200, {"status": "success"})
    status, body = server.json("POST", "/api/unmount_shm", {"segment_ids": [sid]})
    assert status == 500 and body["failed_segment_ids"] == [sid]
    # A name that is not a file there is the caller's mistake.
    status, body = server.json("POST", "/api/mount_shm", {"name": "no-such-" + name, "size": 4096})
    assert status == 400 and "file not found" in body["error"], body


def test_reconfigure_decode_then_prefill(server, shm_file):
    _, path = shm_file
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": path, "size": 4 << 20})
    assert status == 200 and body["mode"] == "decode", body
    first = body["segment_ids"]
    assert server.json("GET", "/api/health") == (200, {"status": "ok", "mode": "decode"})
    # A remount mounts the new segment before the old one goes: only the new one is left.
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "DECODE", "path": path, "size": 2 << 20, "offset": 4 << 20})
    assert status == 200, body
    assert len(body["segment_ids"]) == 1 and body["segment_ids"] != first
    # A failed remount keeps serving from what is mounted.
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": path + "-missing", "size": 4096})
    assert status == 500 and body["mode"] == "decode"
    assert "keeping previous decode segments" in body["error"]
    assert server.json("POST", "/api/reconfigure", {"mode": "prefill"}) == (
        200, {"status": "success", "mode": "prefill"})
    assert server.json("GET", "/api/health") == (200, {"status": "ok", "mode": "prefill"})
    status, body = server.json("POST", "/api/reconfigure", {"mode": "neither"})
    assert status == 400 and "Invalid mode" in body["error"]


def test_unmount_local_disk(server):
    # Bad grace periods are refused before the store is asked.
    for g in (-1, 3601, 1.5, "30", True):
        status, body = server.json("POST", "/api/unmount_local_disk", {"grace_period_seconds": g})
        assert status == 400 and "grace_period_seconds" in body["error"], (g, body)
    # This store build has no disk tier to take off the master: it says so.
    status, body = server.json("POST", "/api/unmount_local_disk", {})
    assert status == 501 and "not supported" in body["error"]


def test_concurrent_clients(server):
    keys = [key() for _ in range(32)]

    def one(k):
        assert server.json("PUT", "/api/put", {"key": k, "value": k * 10})[0] == 200
        return server.request("GET", f"/api/get/{k}")[2]

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(one, keys))
    assert got == [(k * 10).encode() for k in keys]


# ---- bad input -----------------------------------------------------------------------------------

BAD_BODIES = [
    # (method, path, raw body, status, part of the message)
    ("PUT", "/api/put", b"{not json", 400, "Malformed JSON"),
    ("PUT", "/api/put", b"\xff\xfe\x00", 400, "Malformed JSON"),
    ("PUT", "/api/put", b"", 400, "Malformed JSON"),
    ("PUT", "/api/put", b"[1, 2]", 400, "must be a JSON object"),
    ("PUT", "/api/put", b'"text"', 400, "must be a JSON object"),
    ("PUT", "/api/put", b'{"value": "v"}', 400, "Missing key or value"),
    ("PUT", "/api/put", b'{"key": "k"}', 400, "Missing key or value"),
    ("PUT", "/api/put", b'{"key": "", "value": "v"}', 400, "Missing key or value"),
    ("PUT", "/api/put", b'{"key": 7, "value": "v"}', 400, "Invalid key"),
    ("PUT", "/api/put", b'{"key": ["k"], "value": "v"}', 400, "Invalid key"),
    ("PUT", "/api/put", b'{"key": "k", "value": 7}', 400, "Invalid value"),
    ("PUT", "/api/put", b'{"key": "k", "value": {"a": 1}}', 400, "Invalid value"),
    ("PUT", "/api/put", b'{"key": "k", "value": ""}', 400, "invalid parameters"),
    ("PUT", "/api/put", json.dumps({"key": "k" * 5000, "value": "v"}).encode(), 400, "longer"),
    ("PUT", "/api/put", b'{"key": "\\ud800", "value": "v"}', 400, "lone surrogate"),
    ("PUT", "/api/put", b'{"key": "k", "value": "\\udfff"}', 400, "lone surrogate"),
    ("PUT", "/api/put", b"[" * 100000 + b"]" * 100000, 400, "nested too deeply"),
    ("POST", "/api/mount", b'{"size": "1024"}', 400, "Invalid size"),
    ("POST", "/api/mount", b'{"size": 0}', 400, "Invalid size"),
    ("POST", "/api/mount", b'{"size": true}', 400, "Invalid size"),
    ("POST", "/api/mount", b'{"size": 4096, "protocol": 5}', 400, "protocol or location"),
    ("POST", "/api/mount", b"nope", 400, "Malformed JSON"),
    ("POST", "/api/unmount", b"{}", 400, "Missing segment_ids"),
    ("POST", "/api/unmount", b'{"segment_ids": [1]}', 400, "Invalid segment_ids"),
    ("POST", "/api/unmount", b'{"segment_ids": ["x"], "grace_period_seconds": "1"}', 400,
     "grace_period_seconds"),
    ("POST", "/api/mount_shm", b'{"name": "../etc/passwd", "size": 4096}', 400, "name or size"),
    ("POST", "/api/mount_shm", b'{"name": "seg"}', 400, "name or size"),
    ("POST", "/api/mount_shm", b'{"name": "seg", "size": 4096, "offset": -1}', 400, "offset"),
    ("POST", "/api/unmount_shm", b'{"segment_ids": []}', 400, "Missing segment_ids"),
    ("POST", "/api/unmount_shm", b'{"segment_ids": {"a": 1}}', 400, "Invalid segment_ids"),
    ("POST", "/api/unmount_local_disk", b"[]", 400, "must be a JSON object"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "size": 4096}', 400, "Missing path or size"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": 1, "size": 4096}', 400,
     "Invalid path or size"),
    ("POST", "/api/reconfigure", b'{"mode": 3}', 400, "Invalid mode"),
    ("POST", "/api/reconfigure", b"{]", 400, "Malformed JSON"),
]


@pytest.mark.parametrize("method,path,raw,status,msg", BAD_BODIES,
                         ids=[f"{p}:{r[:24]!r}" for _, p, r, _, _ in BAD_BODIES])
def test_bad_request_is_a_clear_4xx(server, method, path, raw, status, msg):
    got, ctype, data = server.request(method, path, raw,
                                      headers={"Content-Type": "application/json"})
    assert got == status, data
    assert ctype.startswith("application/json")
    assert msg in json.loads(data)["error"], data
    assert server.alive()


def test_refused_put_leaves_nothing_readable(server):
    for body in ({"key": "refused-k", "value": 7}, {"key": "refused-k", "value": ""}):
        assert server.json("PUT", "/api/put", body)[0] == 400
    assert server.json("GET", "/api/exist/refused-k") == (200, {"exists": False})


def test_oversized_body_by_declared_length(server):
    k = key()
    body = json.dumps({"key": k, "value": "x" * (MAX_BODY + 10)}).encode()
    status, data = server.json("PUT", "/api/put", body)
    assert status == 413 and f"limit is {MAX_BODY} bytes" in data["error"]
    assert server.json("GET", f"/api/exist/{k}") == (200, {"exists": False})
    # Just under the limit is fine.
    small = {"key": k, "value": "y" * (MAX_BODY - 100)}
    assert server.json("PUT", "/api/put", small)[0] == 200
    assert len(server.request("GET", f"/api/get/{k}")[2]) == MAX_BODY - 100
    assert server.alive()


def test_oversized_chunked_body(server):
    """A body without a declared length is counted as it arrives and refused once past the
    limit."""
    k = key()

    def chunks():
        yield json.dumps({"key": k, "value": ""})[:-2].encode()
        for _ in range(20):
            yield b"z" * (128 << 10)
        yield b'"}'

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        try:
            conn.request("PUT", "/api/put", body=chunks(), encode_chunked=True,
                         headers={"Transfer-Encoding": "chunked"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before everything was sent
        r = conn.getresponse()
        assert r.status == 413
        assert "too large" in json.loads(r.read())["error"]
    finally:
        conn.close()
    assert server.json("GET", f"/api/exist/{k}") == (200, {"exists": False})
    assert server.alive()


def test_unknown_route_and_wrong_method(server):
    status, body = server.json("GET", "/api/nothing")
    assert status == 404 and "No such route" in body["error"]
    status, body = server.json("POST", "/api/put", {"key": "k", "value": "v"})
    assert status == 405 and "not allowed" in body["error"]
    status, body = server.json("GET", "/api/remove/k")
    assert status == 405
    assert server.json("GET", "/api/exist/k") == (200, {"exists": False})


def test_client_that_dies_mid_body(server):
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"PUT /api/put HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"key\": \"half\", \"val")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"this is not http\r\n\r\n")
        s.recv(1024)
    assert server.alive()
    assert server.json("GET", "/api/exist/half") == (200, {"exists": False})


# ---- the process ---------------------------------------------------------------------------------

def test_console_script_help_and_version():
    script = os.path.join(os.path.dirname(sys.executable), "mc_store_rest_server")
    assert os.access(script, os.X_OK), f"{script} is not installed"
    out = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for flag in ("--config", "--define", "--port", "--max-wait-time", "--max-body-size", "--host"):
        assert flag in out.stdout
    out = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    from mooncake import __version__
    assert out.stdout.strip() == f"mc_store_rest_server {__version__}"


@pytest.mark.parametrize("args,msg", [
    (["--port", "70000"], "port out of range"),
    (["--max-body-size", "lots"], "Invalid segment size"),
    (["--max-body-size", "0"], "must be positive"),
])
def test_bad_flags(args, msg):
    out = subprocess.run(server_cmd(*args), capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and msg in out.stderr, out.stderr


def test_bad_config_value_exits_with_a_message(master):
    out = subprocess.run(server_cmd("--port", "0", f"-Dmaster_server_address={master.addr}",
                                    "-Dglobal_segment_size=huge"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "Invalid segment size" in out.stderr, out.stderr


def test_config_file(master, tmp_path):
    cfg = tmp_path / "mooncake.json"
    cfg.write_text(json.dumps({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                               "master_server_address": master.addr,
                               "global_segment_size": "32mb", "local_buffer_size": "8mb"}))
    s = RestServer("unused:1", "--config", str(cfg), f"-Dmaster_server_address={master.addr}")
    try:
        k = key()
        assert s.json("PUT", "/api/put", {"key": k, "value": "from file"})[0] == 200
        assert s.request("GET", f"/api/get/{k}")[2] == b"from file"
    finally:
        assert s.stop() == 0


def test_no_master_gives_up_after_max_wait_time():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening: refused
    start = time.monotonic()
    out = subprocess.run(server_cmd("--port", "0", "--max-wait-time", "2",
                                    f"-Dmaster_server_address={dead}",
                                    "-Dglobal_segment_size=16mb", "-Dlocal_buffer_size=8mb"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "Failed to start store service" in out.stderr, out.stderr[-2000:]
    assert time.monotonic() - start < 30


def test_port_in_use(master):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        out = subprocess.run(server_cmd("--host", "127.0.0.1", "--port", str(port),
                                        f"-Dmaster_server_address={master.addr}",
                                        "-Dglobal_segment_size=16mb", "-Dlocal_buffer_size=8mb"),
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "in use" in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(master, sig):
    s = RestServer(master.addr)
    k = key()
    assert s.json("PUT", "/api/put", {"key": k, "value": "bye"})[0] == 200
    assert s.stop(sig) == 0
    assert any("Mooncake service stopped" in line for line in s.lines), "".join(s.lines)
