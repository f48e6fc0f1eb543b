"""mooncake.http_metadata_server: ``python -m`` runs the bundled C server (real process, real
HTTP), the reference's flags and their bad values, and the KVBootstrapServer embedding API."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from mooncake import http_metadata_server as hms
from mooncake.http_metadata_server import KVBootstrapServer, KVPoll

MODULE = [sys.executable, "-m", "mooncake.http_metadata_server"]


def http(port, method, key=None, body=None):
    url = f"http://127.0.0.1:{port}/metadata" + ("" if key is None else f"?key={key}")
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def roundtrip(port):
    assert http(port, "GET", "k") [0] == 404
    assert http(port, "PUT", "k", b'{"segment": 1}')[0] == 200
    assert http(port, "GET", "k") == (200, b'{"segment": 1}')
    assert http(port, "DELETE", "k")[0] == 200
    assert http(port, "GET", "k")[0] == 404
    assert http(port, "GET")[0] == 400  # no key


@pytest.fixture
def started():
    procs = []

    def start(*args, env=None):
        p = subprocess.Popen([*MODULE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        procs.append(p)
        line = p.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+)", line)
        assert m, (line, p.stderr.read() if p.poll() is not None else "")
        return p, m.group(1), int(m.group(2))

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_names():
    assert hms.__all__ == ["KVPoll", "KVBootstrapServer", "main"]
    assert [(k.name, k.value) for k in KVPoll] == [
        ("Failed", 0), ("Bootstrapping", 1), ("WaitingForInput", 2), ("Transferring", 3),
        ("Success", 4)]


def test_module_runs_the_c_server(started):
    p, host, port = started("--port", "0", "--host", "127.0.0.1")
    assert host == "127.0.0.1"
    # exec, not a child: the process that answers is the one we started, and it is the C binary.
    assert os.readlink(f"/proc/{p.pid}/exe").endswith("mooncake_http_metadata_server")
    roundtrip(port)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0


def test_defaults_and_log_level(started):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free = s.getsockname()[1]
    s.close()
    env = dict(os.environ)
    env.pop("MC_LOG_LEVEL", None)
    p, host, port = started(f"--port={free}", "--log-level", "WARNING", env=env)
    assert (host, port) == ("0.0.0.0", free)  # the reference's default host
    with open(f"/proc/{p.pid}/environ", "rb") as f:
        assert b"MC_LOG_LEVEL=warn" in f.read().split(b"\0")
    roundtrip(port)


def test_flags_and_bad_values():
    r = subprocess.run([*MODULE, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    for flag in ("--port", "--host", "--log-level"):
        assert flag in r.stdout
    r = subprocess.run([*MODULE, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("mooncake_http_metadata_server ")
    for args, said in [(["--port", "abc"], "invalid int"), (["--port", "70000"], "0..65535"),
                       (["--port", "-1"], "0..65535"), (["--log-level", "LOUD"], "invalid choice"),
                       (["--bogus"], "unrecognized arguments")]:
        r = subprocess.run([*MODULE, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, args
        assert said in r.stderr, (args, r.stderr)


def test_port_in_use_is_a_clear_failure():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = subprocess.run([*MODULE, "--host", "127.0.0.1", "--port", str(port)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1
        assert "cannot listen" in r.stderr and str(port) in r.stderr
    finally:
        s.close()


def test_bootstrap_server_embedding():
    server = KVBootstrapServer(port=0, host="127.0.0.1")
    assert server.poll() is KVPoll.Failed  # not started
    thread = server.run()
    try:
        assert thread.is_alive() and server.port > 0
        assert server.poll() is KVPoll.Success
        roundtrip(server.port)
        with pytest.raises(RuntimeError, match="already running"):
            server.run()
        # A second server on the same port cannot start, and says why.
        clash = KVBootstrapServer(port=server.port, host="127.0.0.1")
        with pytest.raises(RuntimeError, match="cannot listen"):
            clash.run()
        assert clash.poll() is KVPoll.Failed
    finally:
        server.close()
    assert server.poll() is KVPoll.Failed
    server.close()  # twice is fine
    with KVBootstrapServer(0, "127.0.0.1") as s2:
        assert s2.poll() is KVPoll.Success
        roundtrip(s2.port)
    assert s2.poll() is KVPoll.Failed


def test_bootstrap_server_bad_arguments():
    for bad, exc in [("8080", TypeError), (None, TypeError), (True, TypeError),
                     (-1, ValueError), (65536, ValueError)]:
        with pytest.raises(exc):
            KVBootstrapServer(port=bad)
    for bad in [None, "", 5]:
        with pytest.raises(TypeError):
            KVBootstrapServer(port=0, host=bad)
    with pytest.raises(RuntimeError, match="did not start"):
        KVBootstrapServer(port=0, host="no-such-host.invalid").run()


class _Req:
    """An aiohttp-style request, as the reference's tests hand _handle_metadata."""

    def __init__(self, method, key=None, body=b""):
        self.method = method
        self.query = {} if key is None else {"key": key}
        self._body = body

    async def read(self):
        return self._body


def _handle(server, *args, **kw):
    import asyncio

    return asyncio.run(server._handle_metadata(_Req(*args, **kw)))


def test_handler_keys_stripped_blank_refused_in_json():
    s = KVBootstrapServer(port=0)
    for method in ("GET", "PUT", "DELETE"):
        for key in (None, "", "   ", "\t\n"):
            r = _handle(s, method, key, b"v")
            assert (r.status, r.content_type) == (400, "application/json"), (method, key)
            assert json.loads(r.body) == {"success": False, "error": "metadata key is required"}
    assert len(s.store) == 0
    assert _handle(s, "PUT", "  valid  ", b"value").status == 200
    r = _handle(s, "GET", "  valid  ")
    assert (r.status, r.body) == (200, b"value")
    assert "valid" in s.store and "  valid  " not in s.store and dict(s.store) == {"valid": b"value"}
    assert _handle(s, "GET", "other").status == 404
    assert _handle(s, "PATCH", "valid").status == 405
    assert _handle(s, "DELETE", "valid").status == 200
    assert _handle(s, "DELETE", "valid").status == 404
    with pytest.raises(TypeError):
        s.store[1] = b"x"


def test_store_is_the_running_servers():
    s = KVBootstrapServer(port=0, host="127.0.0.1")
    s.store["before"] = b"1"  # loaded into the server when it starts
    s.run()
    try:
        assert http(s.port, "GET", "before") == (200, b"1")
        assert _handle(s, "PUT", " k ", b"2").status == 200
        assert http(s.port, "GET", "k") == (200, b"2")  # the handler wrote into the server
        http(s.port, "PUT", "fromwire", b"3")
        assert s.store["fromwire"] == b"3" and "nope" not in s.store and "   " not in s.store
        del s.store["fromwire"]
        assert http(s.port, "GET", "fromwire")[0] == 404
        with pytest.raises(TypeError):
            len(s.store)
    finally:
        s.close()


def test_c_server_health_stripped_and_blank_keys(started):
    _, _, port = started("--port", "0", "--host", "127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
        assert (r.status, r.read()) == (200, b"OK")
    assert http(port, "PUT", "%20%20valid%20%20", b"v")[0] == 200
    assert http(port, "GET", "valid") == (200, b"v")
    assert http(port, "GET", "%20valid") == (200, b"v")
    for method in ("GET", "PUT", "DELETE"):
        for key in (None, "", "%20%20%20", "%09"):
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/metadata" + ("" if key is None else f"?key={key}"),
                data=b"x" if method == "PUT" else None, method=method)
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=5)
            assert e.value.code == 400
            assert e.value.headers["Content-Type"] == "application/json"
            assert json.loads(e.value.read())["error"] == "metadata key is required"
