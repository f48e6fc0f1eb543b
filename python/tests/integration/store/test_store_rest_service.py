"""The store's REST service (mooncake.mooncake_store_service, mc_store_rest_server) as a real
process: a real mooncake_master, the server started as its console script runs it, and real HTTP
requests over loopback. Every route, then bad input: each gets a clear 4xx with a JSON message,
the server keeps serving, and nothing a refused request carried becomes readable. Then who may
use it: the listening address, the bearer token, and a decode segment that can never be a file
the request names (the "stranger overwrites a file" attack of issue 24)."""

import base64
import hashlib
import hmac
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
TOKEN = "rest-test-token-" + uuid.uuid4().hex  # the module server's bearer token
# The credentials a server would read from the environment: none unless a test gives them.
_AUTH_ENV = ("MC_REST_TOKEN", "MC_REST_TOKEN_FILE", "MC_CLUSTER_SECRET", "MC_CLUSTER_SECRET_FILE")


def server_cmd(*args):
    return [sys.executable, "-m", "mooncake.mooncake_store_service", *args]


class RestServer:
    """mc_store_rest_server on an ephemeral port against master: on 127.0.0.1 (host=None: no
    --host flag, the default), with the environment env added (none of _AUTH_ENV unless given),
    started in cwd. token: what request() sends as the bearer token (None: nothing)."""

    def __init__(self, master_addr, *extra, wait=True, host="127.0.0.1", env=None, token=None,
                 cwd=None):
        self.lines = []
        self.token = token
        self.segment_dir = None
        self.bound_host = None
        e = {k: v for k, v in os.environ.items() if k not in _AUTH_ENV}
        e.update(env or {})
        self.proc = subprocess.Popen(
            server_cmd(*(["--host", host] if host else []), "--port", "0",
                       "--max-wait-time", "10", "--max-body-size", str(MAX_BODY),
                       f"-Dmaster_server_address={master_addr}", "-Dlocal_hostname=127.0.0.1",
                       "-Dmetadata_server=P2PHANDSHAKE", "-Dglobal_segment_size=64mb",
                       "-Dlocal_buffer_size=16mb", "-Dprotocol=tcp", *extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=e, cwd=cwd)
        self.port = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if wait:
            assert wait_for(lambda: self.port is not None or self.proc.poll() is not None, 30)
            assert self.port, "server did not start:\n" + "".join(self.lines)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"decode segment files go in (\S+)", line)
            if m:
                self.segment_dir = m.group(1)
            m = re.search(r"REST API started on ([\d.]+):(\d+)", line)
            if m:
                self.bound_host = m.group(1)
                self.port = int(m.group(2))

    def request(self, method, path, body=None, headers=None, timeout=10, auth=True,
                addr="127.0.0.1"):
        """(status, content type, body bytes); a dict body is sent as JSON. auth: send the
        server's token (when it has one)."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        hdrs = dict(headers or {})
        if auth and self.token is not None:
            hdrs.setdefault("Authorization", f"Bearer {self.token}")
        conn = http.client.HTTPConnection(addr, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=hdrs)
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
def server(master, tmp_path_factory):
    """The shared server, with a bearer token (from --token-file) that every request sends."""
    token_file = tmp_path_factory.mktemp("rest-token") / "token"
    token_file.write_text(TOKEN + "\n")
    s = RestServer(master.addr, "--token-file", str(token_file), token=TOKEN)
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


def test_reconfigure_decode_then_prefill(server):
    name = f"decode-{uuid.uuid4().hex[:8]}"
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": name, "size": 4 << 20})
    assert status == 200 and body["mode"] == "decode", body
    first = body["segment_ids"]
    assert server.json("GET", "/api/health") == (200, {"status": "ok", "mode": "decode"})
    # The file's name is gone once it is mounted: the same name makes a new file next time.
    assert os.listdir(server.segment_dir) == []
    # A remount mounts the new segment before the old one goes: only the new one is left.
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "DECODE", "path": name, "size": 2 << 20, "offset": 4 << 20})
    assert status == 200, body
    assert len(body["segment_ids"]) == 1 and body["segment_ids"] != first
    # A failed remount (no room for a 1 PiB file) keeps serving from what is mounted.
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": name, "size": 1 << 50})
    assert status == 507 and body["mode"] == "decode", body
    assert "keeping previous decode segments" in body["error"]
    assert os.listdir(server.segment_dir) == []
    assert server.json("POST", "/api/reconfigure", {"mode": "prefill"}) == (
        200, {"status": "success", "mode": "prefill"})
    assert server.json("GET", "/api/health") == (200, {"status": "ok", "mode": "prefill"})
    status, body = server.json("POST", "/api/reconfigure", {"mode": "neither"})
    assert status == 400 and "Invalid mode" in body["error"]


def test_unmount_local_disk_takes_the_disk_tier_off(tmp_path):
    """The preStop hook on a service whose store has a disk tier: its copies stop being served
    from disk, the values stay readable from memory, and a repeat is still a success."""
    m = Master("--enable_offload", "--default_kv_lease_ttl=200")
    s = RestServer(m.addr, "-Denable_ssd_offload=true", f"-Dssd_offload_path={tmp_path / 'disk'}")
    try:
        keys = [key() for _ in range(3)]
        for k in keys:
            assert s.json("PUT", "/api/put", {"key": k, "value": "to disk " + k})[0] == 200
        assert wait_for(lambda: m.metric("mooncake_disk_offloads_total") >= len(keys), 30)
        assert m.metric("mooncake_disk_nodes") == 1
        t0 = time.monotonic()
        assert s.json("POST", "/api/unmount_local_disk", {"grace_period_seconds": 1}) == (
            200, {"status": "success"})
        assert time.monotonic() - t0 >= 1.0
        assert m.metric("mooncake_disk_nodes") == 0 and m.metric("mooncake_disk_objects") == 0
        for k in keys:
            assert s.request("GET", f"/api/get/{k}")[2] == ("to disk " + k).encode()
        assert s.json("POST", "/api/unmount_local_disk", {}) == (200, {"status": "success"})
    finally:
        assert s.stop() == 0
        m.stop()


def test_reconfigure_decode_with_a_dev_shm_path(server, shm_file):
    """The reference's form: path names an existing /dev/shm file, mounted as mount_shm mounts
    it; objects land in it. A name that is not there is the caller's mistake."""
    name, path = shm_file
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": path, "size": 4 << 20})
    assert status == 200 and body["mode"] == "decode", body
    k = key()
    assert server.json("PUT", "/api/put", {"key": k, "value": "decode on shm"})[0] == 200
    assert server.request("GET", f"/api/get/{k}")[2] == b"decode on shm"
    status, body = server.json("POST", "/api/reconfigure",
                               {"mode": "decode", "path": path + "-missing", "size": 4096})
    assert status == 400 and "keeping previous decode segments" in body["error"], body
    assert server.json("POST", "/api/reconfigure", {"mode": "prefill"})[0] == 200


def test_unmount_local_disk(server):
    # Bad grace periods are refused before the store is asked.
    for g in (-1, 3601, 1.5, "30", True):
        status, body = server.json("POST", "/api/unmount_local_disk", {"grace_period_seconds": g})
        assert status == 400 and "grace_period_seconds" in body["error"], (g, body)
    # This store has no disk tier to take off the master: nothing to do (the reference's 200).
    assert server.json("POST", "/api/unmount_local_disk", {}) == (200, {"status": "success"})
    assert server.json("POST", "/api/unmount_local_disk", {"grace_period_seconds": 0}) == (
        200, {"status": "success"})


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
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "/nonexistent-mc/s", "size": 4096}',
     400, "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "../x", "size": 4096}', 400,
     "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "..", "size": 4096}', 400,
     "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "/dev/shm/a/b", "size": 4096}',
     400, "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "/dev/shm/..", "size": 4096}',
     400, "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "/dev/shm/", "size": 4096}',
     400, "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "a b", "size": 4096}', 400,
     "plain file name"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "s", "size": 1125899906842625}',
     400, "Invalid size"),
    ("POST", "/api/reconfigure", b'{"mode": "decode", "path": "s", "size": 4096, "offset": 100}',
     400, "page size"),
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
                         headers={"Transfer-Encoding": "chunked",
                                  "Authorization": f"Bearer {TOKEN}"})
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
                      b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
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
    for flag in ("--config", "--define", "--port", "--max-wait-time", "--max-body-size", "--host",
                 "--token-file", "--insecure", "--segment-dir", "--print-token"):
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


# ---- who may use it ------------------------------------------------------------------------------

def _listening(port):
    """The local addresses of the TCP sockets listening on port (/proc/net/tcp, tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                host, p = local.split(":")
                if state == "0A" and int(p, 16) == port:
                    found.append(host)
    return found


def _connects(addr, port):
    try:
        with socket.create_connection((addr, port), timeout=5):
            return True
    except OSError:
        return False


def test_default_bind_is_loopback_only(master):
    s = RestServer(master.addr, host=None)  # no --host: the default
    try:
        assert s.bound_host == "127.0.0.1"
        assert _listening(s.port) == ["0100007F"]  # 127.0.0.1, and nothing else
        assert _connects("127.0.0.1", s.port)
        # 127.0.0.2 is this host too: a socket on every address would take it. (Test traffic
        # stays on loopback: the host's other addresses are not tried.)
        assert not _connects("127.0.0.2", s.port)
    finally:
        assert s.stop() == 0


def test_non_loopback_without_a_token_refuses_to_start(master):
    proc = subprocess.Popen(
        server_cmd("--host", "0.0.0.0", "--port", "0", f"-Dmaster_server_address={master.addr}",
                   "-Dglobal_segment_size=0", "-Dlocal_buffer_size=8mb"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k not in _AUTH_ENV})
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("the server started on 0.0.0.0 without a token:\n" + err[-2000:])
    assert proc.returncode == 1, err
    assert "refusing to listen on 0.0.0.0 without a token" in err and "--insecure" in err, err


def test_non_loopback_with_insecure_or_a_token(master):
    s = RestServer(master.addr, "--insecure", host="0.0.0.0")
    try:
        assert any("WITHOUT authentication" in line for line in s.lines), "".join(s.lines)
        assert s.json("GET", "/api/exist/k", addr="127.0.0.2") == (200, {"exists": False})
    finally:
        assert s.stop() == 0
    s = RestServer(master.addr, host="0.0.0.0", env={"MC_REST_TOKEN": TOKEN}, token=TOKEN)
    try:
        assert not any("WITHOUT" in line for line in s.lines)
        assert s.json("GET", "/api/exist/k", addr="127.0.0.2") == (200, {"exists": False})
        assert s.json("GET", "/api/exist/k", addr="127.0.0.2", auth=False)[0] == 401
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("env,extra,msg", [
    ({"MC_REST_TOKEN": "short"}, [], "must be 16 to 4096 characters"),
    ({"MC_REST_TOKEN": "has a space in it, long enough"}, [], "printable ASCII without spaces"),
    ({}, ["--token-file", "/nonexistent-mc/token"], "cannot read the token file"),
    ({"MC_REST_TOKEN_FILE": "/dev/null"}, [], "is empty"),
    ({"MC_REST_TOKEN": "long-enough-token-0123"}, ["--segment-dir", "/nonexistent-mc/dir"],
     "cannot make the segment directory"),
    ({}, ["--print-token"], "no REST token is configured"),
])
def test_unusable_settings_refuse_to_start(master, env, extra, msg):
    """A token that is set but cannot be used stops the service (it must not start open); so
    does a segment directory that cannot be made; --print-token without a token says so."""
    e = {k: v for k, v in os.environ.items() if k not in _AUTH_ENV}
    e.update(env)
    proc = subprocess.Popen(
        server_cmd("--port", "0", *extra, f"-Dmaster_server_address={master.addr}",
                   "-Dglobal_segment_size=0", "-Dlocal_buffer_size=8mb"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=e)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("the server started with an unusable token:\n" + err[-2000:])
    assert proc.returncode in (1, 2) and msg in err, err


def _routes():
    from mooncake.mooncake_store_service import MooncakeStoreService
    return {(path, method) for path, method, _, _ in
            MooncakeStoreService.routes(MooncakeStoreService.__new__(MooncakeStoreService))}


# Every route but /api/health, each with a body that would change something if it were served.
STRANGER_REQUESTS = [
    ("PUT", "/api/put", {"key": "{seeded}", "value": "overwritten"}),
    ("PUT", "/api/put", {"key": "{fresh}", "value": "planted"}),
    ("GET", "/api/get/{seeded}", None),
    ("GET", "/api/exist/{seeded}", None),
    ("DELETE", "/api/remove/{seeded}", None),
    ("DELETE", "/api/remove_all", None),
    ("POST", "/api/mount", {"size": 4 << 20}),
    ("POST", "/api/unmount", {"segment_ids": ["{sid}"]}),
    ("POST", "/api/mount_shm", {"name": "{shm}", "size": 1 << 20}),
    ("POST", "/api/unmount_shm", {"segment_ids": ["{sid}"]}),
    ("POST", "/api/unmount_local_disk", {}),
    ("POST", "/api/reconfigure", {"mode": "decode", "path": "stranger", "size": 4 << 20}),
    ("POST", "/api/reconfigure", {"mode": "prefill"}),
]

WRONG_CREDENTIALS = [
    {},
    {"Authorization": "Bearer not-the-token-not-the-token"},
    {"Authorization": "Bearer " + TOKEN[:-1]},
    {"Authorization": "Bearer " + TOKEN + "x"},
    {"Authorization": "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode()},
    {"Authorization": TOKEN},
    {"Authorization": "Bearer"},
]


def test_requests_without_the_token_get_401_and_change_nothing(shm_file):
    routes = _routes()
    assert {(p.replace("{seeded}", "{key}"), m) for m, p, _ in STRANGER_REQUESTS} == \
        routes - {("/api/health", "GET")}, "a route is missing from STRANGER_REQUESTS"
    m = Master()
    # The token from the environment (MC_REST_TOKEN).
    s = RestServer(m.addr, env={"MC_REST_TOKEN": TOKEN}, token=TOKEN)
    try:
        seeded, fresh = key(), key()
        assert s.json("PUT", "/api/put", {"key": seeded, "value": "seeded"})[0] == 200
        status, body = s.json("POST", "/api/mount", {"size": 4 << 20})
        assert status == 200, body
        sid = body["segment_ids"][0]
        segments, capacity = m.metric("mooncake_master_segments"), \
            m.metric("mooncake_master_capacity_bytes")
        fill = {"{seeded}": seeded, "{fresh}": fresh, "{sid}": sid, "{shm}": shm_file[0]}

        def sub(v):
            if isinstance(v, str):
                for a, b in fill.items():
                    v = v.replace(a, b)
                return v
            if isinstance(v, list):
                return [sub(x) for x in v]
            if isinstance(v, dict):
                return {k: sub(x) for k, x in v.items()}
            return v

        for headers in WRONG_CREDENTIALS:
            for method, path, body in STRANGER_REQUESTS:
                got, ctype, data = s.request(method, sub(path), sub(body), headers=headers,
                                             auth=False)
                assert got == 401, (method, path, headers, data)
                assert ctype.startswith("application/json")
                err = json.loads(data)["error"]
                assert "Bearer" in err or "bearer" in err, err
        # The health probe needs nothing.
        assert s.json("GET", "/api/health", auth=False) == (200, {"status": "ok",
                                                                   "mode": "prefill"})
        # Nothing changed: the seeded value, no planted key, the same segments, prefill.
        assert s.request("GET", f"/api/get/{seeded}")[2] == b"seeded"
        assert s.json("GET", f"/api/exist/{fresh}") == (200, {"exists": False})
        assert m.metric("mooncake_master_segments") == segments
        assert m.metric("mooncake_master_capacity_bytes") == capacity
        assert s.json("GET", "/api/health") == (200, {"status": "ok", "mode": "prefill"})
        assert os.listdir(s.segment_dir) == []
        # With the token the same segment unmounts: the refusals left it alone.
        assert s.json("POST", "/api/unmount", {"segment_ids": [sid]})[0] == 200
        # Refusals are logged, one line a second at most, with the count of the rest.
        assert any("refused PUT /api/put from 127.0.0.1" in line for line in s.lines), \
            "".join(s.lines[-20:])
    finally:
        assert s.stop() == 0
        m.stop()


def test_cluster_secret_gives_the_token(tmp_path):
    """With the cluster secret and no token of its own, the service requires the token derived
    from the secret; the secret itself is not a token."""
    secret = "cluster-secret-" + uuid.uuid4().hex
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret + "\n")
    derived = hmac.new(secret.encode(), b"mc-rest-token", hashlib.sha256).hexdigest()
    env = {"MC_CLUSTER_SECRET_FILE": str(secret_file)}
    e = {k: v for k, v in os.environ.items() if k not in _AUTH_ENV}
    e.update(env)
    out = subprocess.run(server_cmd("--print-token"), capture_output=True, text=True, env=e,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == derived, out.stderr
    m = Master(f"--cluster_secret_file={secret_file}")
    s = RestServer(m.addr, env=env, token=derived)
    try:
        k = key()
        for bad in (secret, ""):
            status, _ = s.json("PUT", "/api/put", {"key": k, "value": "v"},
                               headers={"Authorization": f"Bearer {bad}"})
            assert status == 401
        assert s.json("PUT", "/api/put", {"key": k, "value": "with the secret"})[0] == 200
        assert s.request("GET", f"/api/get/{k}")[2] == b"with the secret"
    finally:
        assert s.stop() == 0
        m.stop()


def _fill(s, n=80, size=128 << 10):
    """n puts of size bytes each (more than the test pools hold): how many succeeded."""
    ok = 0
    for i in range(n):
        ok += s.json("PUT", "/api/put", {"key": key(), "value": chr(ord("a") + i % 26) * size},
                     timeout=30)[0] == 200
    return ok


@pytest.mark.parametrize("attack", ["absolute", "traversal", "symlink"])
def test_reconfigure_cannot_mount_a_victim_file(tmp_path, attack):
    """The issue-24 attack: a decode reconfigure naming a file the service can open, then puts
    that would land in it. Every way of naming it is refused and the victim keeps its bytes."""
    victim = tmp_path / "victim.bin"
    original = os.urandom(1 << 20)
    victim.write_bytes(original)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    m = Master()
    # No token: the caller here may use the service; what it may not do is reach a file.
    s = RestServer(m.addr, "-Dglobal_segment_size=0", cwd=str(cwd))
    try:
        # (Without a segment directory in its log, as before the fix, the server's cwd plays it.)
        base = s.segment_dir or str(cwd)
        if attack == "absolute":
            path = str(victim)
        elif attack == "traversal":
            path = os.path.relpath(victim, base)
            assert path.startswith("../")
        else:
            os.symlink(victim, os.path.join(base, "evil"))
            path = "evil"
        status, body = s.json("POST", "/api/reconfigure",
                              {"mode": "decode", "path": path, "size": 1 << 20})
        assert status in (400, 409), body
        assert s.json("GET", "/api/health") == (200, {"status": "ok", "mode": "prefill"})
        # Memory of the store's own, then more puts than everything mounted holds.
        assert s.json("POST", "/api/mount", {"size": 4 << 20})[0] == 200
        assert _fill(s) > 0
        assert victim.read_bytes() == original
        if attack == "symlink":
            assert os.path.islink(os.path.join(base, "evil"))  # left as it was found
    finally:
        assert s.stop() == 0
        m.stop()
    assert victim.read_bytes() == original


def test_mount_shm_refuses_a_symbolic_link(tmp_path):
    victim = tmp_path / "victim.bin"
    original = os.urandom(1 << 20)
    victim.write_bytes(original)
    name = f"mc-rest-link-{uuid.uuid4().hex[:8]}"
    os.symlink(victim, f"/dev/shm/{name}")
    m = Master()
    s = RestServer(m.addr, "-Dglobal_segment_size=0")
    try:
        status, body = s.json("POST", "/api/mount_shm", {"name": name, "size": 1 << 20})
        assert status == 400 and body["ret"] == -600, body
        # The reference's decode form names the same file: refused the same way.
        status, body = s.json("POST", "/api/reconfigure",
                              {"mode": "decode", "path": f"/dev/shm/{name}", "size": 1 << 20})
        assert status == 400 and "rolled back to prefill" in body["error"], body
        assert s.json("POST", "/api/mount", {"size": 4 << 20})[0] == 200
        assert _fill(s) > 0
        assert victim.read_bytes() == original
    finally:
        os.unlink(f"/dev/shm/{name}")
        assert s.stop() == 0
        m.stop()


def test_reconfigure_with_the_token_round_trips_data(tmp_path):
    """The legitimate switch: the service makes the decode segment's file itself, puts land in
    it and read back byte for byte, and remounts and prefill give the memory back."""
    m = Master()
    s = RestServer(m.addr, "-Dglobal_segment_size=0", env={"MC_REST_TOKEN": TOKEN}, token=TOKEN)
    try:
        assert s.segment_dir and os.stat(s.segment_dir).st_mode & 0o777 == 0o700
        status, body = s.json("POST", "/api/reconfigure",
                              {"mode": "decode", "path": "decode-seg", "size": 8 << 20})
        assert status == 200 and body["mode"] == "decode", body
        assert os.listdir(s.segment_dir) == []  # mounted, then unlinked
        assert wait_for(lambda: m.metric("mooncake_master_capacity_bytes") == 8 << 20, 30)
        values = {key(): bytes(os.urandom(48 << 10)).hex() for _ in range(32)}  # 3 MiB
        for k, v in values.items():
            assert s.json("PUT", "/api/put", {"key": k, "value": v})[0] == 200
        for k, v in values.items():
            assert s.request("GET", f"/api/get/{k}")[2] == v.encode()
        # Make-before-break with the same name: a new file, the old segment retired.
        status, body = s.json("POST", "/api/reconfigure", {"mode": "decode", "path": "decode-seg",
                                                           "size": 4 << 20, "offset": 1 << 20})
        assert status == 200, body
        assert wait_for(lambda: m.metric("mooncake_master_capacity_bytes") == 4 << 20, 30)
        k = key()
        assert s.json("PUT", "/api/put", {"key": k, "value": "after the remount"})[0] == 200
        assert s.request("GET", f"/api/get/{k}")[2] == b"after the remount"
        assert s.json("POST", "/api/reconfigure", {"mode": "prefill"}) == (
            200, {"status": "success", "mode": "prefill"})
        assert wait_for(lambda: m.metric("mooncake_master_capacity_bytes") == 0, 30)
        seg_dir = s.segment_dir
    finally:
        assert s.stop() == 0
        m.stop()
    assert not os.path.exists(seg_dir)  # the service removes its directory on the way out
