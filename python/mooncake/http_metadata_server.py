"""The HTTP metadata server, as the reference's ``mooncake.http_metadata_server``.

``python -m mooncake.http_metadata_server --port 8080 [--host 0.0.0.0] [--log-level INFO]`` runs
the bundled C server ``mooncake_http_metadata_server`` (GET/PUT/DELETE ``/metadata?key=K``), the
same one the ``mooncake_http_metadata_server`` console script starts; the Transfer Engine then uses
``http://host:port/metadata`` as its metadata connection string.

:class:`KVBootstrapServer` keeps the reference's embedding API: ``run()`` starts the server (here a
child process, so serving never competes with the caller for the GIL), ``poll()`` says whether it is
up, ``close()`` stops it. ``port=0`` picks a free port, readable as ``.port`` after ``run()``.
"""

import argparse
import enum
import os
import re
import subprocess
import sys
import threading
import time

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


class KVBootstrapServer:
    """An HTTP metadata server on ``host:port``, in a child process while it runs."""

    def __init__(self, port: int, host: str = "0.0.0.0"):
        self.port = _check_port(port)
        if not isinstance(host, str) or not host:
            raise TypeError(f"host must be a non-empty str, not {host!r}")
        self.host = host
        self.proc = None
        self.thread = None  # the thread that drains the server's output

    def run(self, timeout: float = 10.0):
        """Starts the server and waits until it listens (RuntimeError, with the server's own
        message, when it cannot, e.g. the port is taken). Returns the output-draining thread, as
        the reference returns its serving thread."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("server is already running")
        self.proc = subprocess.Popen(_command(self.host, self.port), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on .*:(\d+)\s*$", line)
            if m:
                self.port = int(m.group(1))
                self.thread = threading.Thread(target=self.proc.stdout.read, daemon=True)
                self.thread.start()
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
