"""What the store tests (and the e2e soak) share: a real mooncake_master on ephemeral ports,
store clients each in its own process (store_worker.py), polling and a process's memory."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from mooncake.cli import binary_path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "store_worker.py"


def free_port():
    """A loopback port nothing listens on right now (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout=15.0, step=0.05):
    """Polls pred until it is true or timeout seconds passed; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def rss_mib(pid):
    """The resident memory of process pid, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Master:
    """mooncake_master on 127.0.0.1 with ephemeral RPC and admin ports. prefix: a command it runs
    under (``ip netns exec NS``, or unshare into a time namespace); it then runs in a process
    group of its own and signals go to the whole group, so they reach a master that the prefix
    command forked."""

    def __init__(self, *flags, port=0, prefix=()):
        self.flags = list(flags)
        self.prefix = list(prefix)
        self.proc = None
        self.port = port
        self.metrics_port = None
        self.start()

    def start(self):
        self.metrics_port = None  # a new one each start; the RPC port stays when it was given
        cmd = [*self.prefix, binary_path("mooncake_master"), f"--port={self.port}",
               "--metrics_port=0", "--rpc_address=127.0.0.1", *self.flags]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=bool(self.prefix))
        deadline = time.monotonic() + 10
        want_meta = "--enable_http_metadata_server" in self.flags
        self.http_metadata_port = None
        self.kv_events_port = self.kv_replay_port = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on rpc [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            m = re.search(r"metrics on [\d.]+:(\d+)", line)
            if m:
                self.metrics_port = int(m.group(1))
            m = re.search(r"kv events on port (\d+), replay on port (\d+)", line)
            if m:
                self.kv_events_port, self.kv_replay_port = int(m.group(1)), int(m.group(2))
            m = re.search(r"http metadata on [\d.]+:(\d+)", line)
            if m:
                self.http_metadata_port = int(m.group(1))
            if self.port and self.metrics_port and (self.http_metadata_port or not want_meta):
                break
        if not (self.port and self.metrics_port):
            self.stop()
            raise RuntimeError("mooncake_master did not start")
        # Keep draining its output so it never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def http(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5) as r:
            return r.read().decode()

    def metric(self, name):
        """Sum of every sample of a Prometheus metric (labels ignored)."""
        total = 0.0
        for line in self.http("/metrics").splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            if self.prefix:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Worker:
    """A store client process; run() executes code in it and returns its ``result``."""

    def __init__(self, env=None, stderr=None, prefix=()):
        e = dict(os.environ)
        e.update(env or {})
        # stderr: a file to collect the client's log lines in (default: the test's stderr).
        # prefix: a command it runs under (``ip netns exec NS``, which execs: proc is the worker).
        self.proc = subprocess.Popen([*prefix, sys.executable, str(WORKER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr, text=True, env=e)
        self.pid = self._read()["result"]

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"store worker exited (rc={self.proc.poll()})")
        return json.loads(line)

    def run(self, code):
        self.send(code)
        return self.reply()

    def send(self, code):
        """Starts code without waiting for it (see reply())."""
        self.proc.stdin.write(json.dumps({"code": code}) + "\n")
        self.proc.stdin.flush()

    def reply(self):
        reply = self._read()
        if not reply["ok"]:
            raise AssertionError("worker failed:\n" + reply["error"])
        return reply["result"]

    def stopped(self):
        """True while the process is stopped (SIGSTOP, or a failpoint that stopped it)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"

    def signal(self, sig):
        self.proc.send_signal(sig)

    def setup(self, master, segment=32 << 20, buffer=16 << 20, protocol="tcp", extra=""):
        rc = self.run(f"result = store.setup('127.0.0.1', 'P2PHANDSHAKE', {segment}, {buffer}, "
                      f"{protocol!r}, '', {master.addr!r}{extra})")
        assert rc == 0, f"setup returned {rc}"
        return self.run("result = store.get_hostname()")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a test may have left it stopped
            try:
                self.run("result = store.close()")
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def put_many(worker, prefix, n, size):
    """Puts n values of size bytes (pattern) under prefix0 .. prefix{n-1} in worker, each
    asserted 0; returns each key's digest."""
    return worker.run("out = {}\n"
                      f"for i in range({n}):\n"
                      f"    v = pattern({size}, '{prefix}%d' % i)\n"
                      f"    assert store.put('{prefix}%d' % i, v) == 0\n"
                      f"    out['{prefix}%d' % i] = sha(v)\n"
                      "result = out")


def digests(worker, keys):
    """Each key's digest as worker reads it."""
    return worker.run(f"result = {{k: sha(store.get(k)) for k in {list(keys)!r}}}")


def local_store(master, segment=32 << 20, buffer=8 << 20):
    """A store client in this process (tcp, P2PHANDSHAKE) set up against master; close it."""
    from mooncake.store import MooncakeDistributedStore

    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", segment, buffer, "tcp", "", master.addr) == 0
    return s


def c_buffer(data):
    """(a ctypes copy of data, its address): keep the first alive while the address is used."""
    import ctypes

    b = (ctypes.c_ubyte * len(data)).from_buffer_copy(data)
    return b, ctypes.addressof(b)
