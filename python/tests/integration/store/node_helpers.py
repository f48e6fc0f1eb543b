"""A storage node (the mooncake_client daemon) for the tests: started on a control port of its
own, with its segment on a real master; dummy clients attach to it by that port."""

import itertools
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

from mooncake.cli import binary_path

_PORTS = itertools.count(40000 + (os.getpid() * 7) % 20000)


def node_port():
    """A control port no other node of this host uses now: its abstract socket and the TCP
    service port of that number are both free."""
    for port in _PORTS:
        port %= 65536
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(f"\0mooncake_client_{port}.sock")
            t.bind(("0.0.0.0", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
            t.close()


def run_client(*flags, timeout=30):
    """Runs mooncake_client to completion (for flags that make it exit)."""
    return subprocess.run([binary_path("mooncake_client"), *flags], capture_output=True,
                          text=True, timeout=timeout)


class Node:
    """mooncake_client on 127.0.0.1 contributing `segment` bytes to master's pool."""

    def __init__(self, master, segment="64mb", http=False, extra=(), env=None):
        self.port = node_port()
        self.http_port = None
        self.segment = None
        cmd = [binary_path("mooncake_client"), f"--master_server_address={master.addr}",
               "--host=127.0.0.1", "--metadata_server=P2PHANDSHAKE",
               f"--global_segment_size={segment}", f"--port={self.port}", *extra]
        if http:
            cmd += ["--enable_http_server", "--http_port=0", "--http_host=127.0.0.1"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, **env} if env else None)
        self.lines = []
        deadline = time.monotonic() + 15
        ready = serving = False
        while time.monotonic() < deadline and not ready:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"segment (\S+) \(\d+ bytes\) mounted", line)
            if m:
                self.segment = m.group(1)
            m = re.search(r"http on port (\d+)", line)
            if m:
                self.http_port = int(m.group(1))
            serving = serving or "serving dummy clients" in line
            ready = serving and bool(self.http_port or not http)
        if not ready:
            self.stop(signal.SIGKILL)
            raise RuntimeError("mooncake_client did not start:\n" + "".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    @property
    def socket_name(self):
        return f"\0mooncake_client_{self.port}.sock"

    def http(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as r:
            return r.status, r.read().decode()

    def metric(self, name):
        total = 0.0
        for line in self.http("/metrics")[1].splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def dummy_setup(worker, node, local_buffer=16 << 20):
    rc = worker.run(f"result = store.setup_dummy(1 << 30, {local_buffer}, {node.addr!r})")
    assert rc == 0, f"setup_dummy returned {rc}"
