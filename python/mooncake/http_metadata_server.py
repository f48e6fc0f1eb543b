"""The HTTP metadata server, as the reference's ``mooncake.http_metadata_server``.

``python -m mooncake.http_metadata_server --port 8080 [--host 0.0.0.0] [--log-level INFO]`` runs
the bundled C server ``mooncake_http_metadata_server`` (GET/PUT/DELETE ``/metadata?key=K``), the
same one the ``mooncake_http_metadata_server`` console script starts; the Transfer Engine then uses
``http://host:port/metadata`` as its metadata connection string.

:class:`KVBootstrapServer` keeps the reference's embedding API: ``run()`` starts the server (here a
child process, so serving never competes with the caller for the GIL), ``poll()`` says whether it is
up, ``close()`` stops it. ``port=0`` picks a free port, readable as ``.port`` after ``run()``.

The reference's in-process surface is kept too: ``store`` maps keys to values (bytes) and
``await _handle_metadata(request)`` answers one aiohttp-style request (``.method``, ``.query``,
``await .read()``) with the server's rules (the key stripped of white space, a blank one refused
with 400 in JSON; GET, PUT, DELETE). While the server runs, ``store`` reads and writes the
server's own keys over HTTP (it cannot list them: ``len``/iteration are refused); before
``run()`` it is a local table, whose entries ``run()`` loads into the server.
"""

import argparse
import collections.abc
import enum
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["KVPoll", "KVBootstrapServer", "main"]

_BINARY = "mooncake_http_metadata_server"
_LOG_LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error",
               "CRITICAL": "error"}


class KVPoll(enum.Enum):
    """A server's state, as the reference numbers it."""

    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


def _binary():
    from mooncake.cli import binary_path

    return binary_path(_BINARY)


def _version():
    from mooncake import __version__

    return __version__


def _command(host, port):
    return [_binary(), f"--host={host}", f"--port={port}"]


def _check_port(port):
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int, not {type(port).__name__}")
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, not {port}")
    return port


_KEY_REQUIRED = b'{"success":false,"error":"metadata key is required"}'


class _Response:
    """An answer of :meth:`KVBootstrapServer._handle_metadata`, with the fields of the aiohttp
    response the reference returns."""

    def __init__(self, status, body, content_type="application/json"):
        self.status = status
        self.body = body
        self.content_type = content_type

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return f"<_Response {self.status} {self.body[:60]!r}>"


class _Store(collections.abc.MutableMapping):
    """The server's keys: over HTTP while it runs, else a local table (loaded into it at run)."""

    def __init__(self, server):
        self._server = server
        self._local = {}

    def _live(self):
        return self._server.poll() is KVPoll.Success

    def _call(self, method, key, body=None):
        host = self._server.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        url = (f"http://{host}:{self._server.port}/metadata?key="
               + urllib.parse.quote(key, safe=""))
        req = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    @staticmethod
    def _check(key):
        if not isinstance(key, str):
            raise TypeError(f"metadata keys are str, not {type(key).__name__}")
        return key

    def __getitem__(self, key):
        key = self._check(key)
        if not self._live():
            return self._local[key]
        status, body = self._call("GET", key)
        if status != 200:
            raise KeyError(key)
        return body

    def __setitem__(self, key, value):
        key = self._check(key)
        value = bytes(value)
        if not self._live():
            self._local[key] = value
            return
        status, body = self._call("PUT", key, value)
        if status != 200:
            raise ValueError(f"the server refused key {key!r}: {status} {body[:200]!r}")

    def __delitem__(self, key):
        key = self._check(key)
        if not self._live():
            del self._local[key]
            return
        if self._call("DELETE", key)[0] != 200:
            raise KeyError(key)

    def __contains__(self, key):
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self):
        if self._live():
            raise TypeError("a running server's keys cannot be listed")
        return iter(list(self._local))

    def __len__(self):
        if self._live():
            raise TypeError("a running server's keys cannot be counted")
        return len(self._local)

    def _load(self):
        pending, self._local = self._local, {}
        for k, v in pending.items():
            self[k] = v


class KVBootstrapServer:
    """An HTTP metadata server on ``host:port``, in a child process while it runs."""

    def __init__(self, port: int, host: str = "0.0.0.0"):
        self.port = _check_port(port)
        if not isinstance(host, str) or not host:
            raise TypeError(f"host must be a non-empty str, not {host!r}")
        self.host = host
        self.proc: "subprocess.Popen[str] | None" = None
        self.thread: "threading.Thread | None" = None  # drains the server's output
        self.store = _Store(self)

    async def _handle_metadata(self, request):
        """Answers one ``/metadata`` request (aiohttp-style: ``.method``, ``.query``,
        ``await .read()``) on :attr:`store`, by the server's rules."""
        key = str(request.query.get("key", "") or "").strip()
        if not key:
            return _Response(400, _KEY_REQUIRED)
        method = request.method.upper()
        if method in ("GET", "HEAD"):
            value = self.store.get(key)
            if value is None:
                return _Response(404, b"metadata not found")
            return _Response(200, value)
        if method == "PUT":
            try:
                self.store[key] = await request.read()
            except ValueError as exc:
                return _Response(400, str(exc).encode())
            return _Response(200, b"metadata updated")
        if method == "DELETE":
            try:
                del self.store[key]
            except KeyError:
                return _Response(404, b"metadata not found")
            return _Response(200, b"metadata deleted")
        return _Response(405, b"Method not allowed")

    def run(self, timeout: float = 10.0):
        """Starts the server and waits until it listens (RuntimeError, with the server's own
        message, when it cannot, e.g. the port is taken). Returns the output-draining thread, as
        the reference returns its serving thread."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("server is already running")
        proc = self.proc = subprocess.Popen(_command(self.host, self.port),
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)
        assert proc.stdout is not None  # a pipe: stdout=PIPE
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on .*:(\d+)\s*$", line)
            if m:
                self.port = int(m.group(1))
                self.thread = threading.Thread(target=proc.stdout.read, daemon=True)
                self.thread.start()
                self.store._load()
                return self.thread
        self._stop()
        raise RuntimeError(f"{_BINARY} did not start on {self.host}:{self.port}: "
                           f"{''.join(lines).strip() or 'no output'}")

    def poll(self) -> KVPoll:
        """Success while the server runs, Failed otherwise."""
        if self.proc is None or self.proc.poll() is not None:
            return KVPoll.Failed
        return KVPoll.Success

    def close(self):
        """Stops the server (a no-op when it is not running)."""
        self._stop()

    def _stop(self):
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.thread is not None:
            self.thread.join(timeout=2)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self):
        self.run()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m mooncake.http_metadata_server",
                                     description="HTTP Metadata Server for Mooncake",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--port", type=int, default=8080, help="Port to listen on")
    parser.add_argument("--host", type=str, default="0.0.0.0", help="Host to bind to")
    parser.add_argument("--log-level", type=str, choices=list(_LOG_LEVELS), default=None,
                        help="Logging level (default: MC_LOG_LEVEL, else warnings and errors)")
    parser.add_argument("--version", action="version", version=f"{_BINARY} {_version()}")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"argument --port: {args.port} is not in 0..65535")
    return args


def main(argv=None):
    """Runs the C server in this process's place (exec): signals reach it directly and its exit
    status is the command's."""
    args = parse_args(argv)
    try:
        cmd = _command(args.host, args.port)
    except FileNotFoundError as exc:
        print(f"mooncake: {exc}", file=sys.stderr)
        return 127
    env = dict(os.environ)
    if args.log_level is not None:
        env["MC_LOG_LEVEL"] = _LOG_LEVELS[args.log_level]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
