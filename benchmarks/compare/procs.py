"""Starting and stopping the processes of one measurement: workers that speak one JSON object per
stdout line, masters and Redis servers that listen on a port. Everything binds to 127.0.0.1 on a
free ephemeral port; everything started is stopped, also on errors."""

import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return f"exited with status {proc.returncode} before listening"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return None
        except OSError:
            time.sleep(0.1)
    return f"not listening on port {port} after {timeout:.0f} s"


class Worker:
    """A child process that prints JSON lines; stderr goes to a log file."""

    def __init__(self, argv, log_path, env, cwd=None):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, env=env, cwd=cwd, start_new_session=True)
        self.lines = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                continue
        self.lines.put(None)  # end of output

    def next(self, timeout):
        """The next JSON object, or None at end of output; raises TimeoutError."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no output for {timeout:.0f} s") from None

    def send(self, line):
        """One line to the worker's stdin (False when it is gone)."""
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def tail(self, n=3):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-n:])
        except OSError:
            return ""

    def stop(self, grace=10.0):
        """Close stdin (the worker's signal to leave), then TERM, then KILL its process group."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc)
        self._log.close()
        return self.proc.returncode


class Server:
    """A daemon (master, redis-server) listening on a port."""

    def __init__(self, argv, port, log_path, env, ready_timeout=30.0):
        self._log = open(log_path, "ab")
        self.log_path = log_path
        self.port = port
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.error = wait_port(port, self.proc, ready_timeout)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                _kill_group(self.proc)
        self._log.close()


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
