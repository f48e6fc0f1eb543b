"""Masters in HA mode for the failover tests: each a real mooncake_master with --enable_ha on a
real etcd cluster (etcd_helpers.EtcdCluster), its role read from the lines it prints."""

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mooncake.cli import binary_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from etcd_helpers import free_port  # noqa: E402

# Short enough for quick failovers, long enough that a loaded 2-core machine keeps its lease.
LEASE_S = 3


class HaMaster:
    """``mooncake_master --enable_ha`` on 127.0.0.1 with a fixed RPC port."""

    def __init__(self, endpoints, cluster, *flags, lease_s=LEASE_S):
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.cmd = [binary_path("mooncake_master"), "--enable_ha", f"--etcd_endpoints={endpoints}",
                    f"--cluster_id={cluster}", "--rpc_address=127.0.0.1", f"--port={self.port}",
                    "--metrics_port=0", f"--ha_lease_ttl_sec={lease_s}",
                    "--default_kv_lease_ttl=200", *flags]
        self.lines = []
        self.terms, self.ended = [], []
        self.cv = threading.Condition()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self.wait_line("standby in cluster", 10):
            self.kill()
            raise RuntimeError("HA master did not start:\n" + self.output())

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line)
                m = re.search(r"leader for term (\d+)", line)
                if m:
                    self.terms.append(int(m.group(1)))
                m = re.search(r"standby \(term (\d+) ended\)", line)
                if m:
                    self.ended.append(int(m.group(1)))
                self.cv.notify_all()

    def wait_line(self, text, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while not any(text in ln for ln in self.lines):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(left)
        return True

    @property
    def leading(self):
        with self.cv:
            return len(self.terms) > len(self.ended)

    def output(self):
        with self.cv:
            return "".join(self.lines)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class HaAddress:
    """What Worker.setup takes as a master: the cluster's etcd:// address."""

    def __init__(self, etcd):
        self.addr = etcd.url


def view_key(cluster):
    return f"mooncake-store/{cluster}/master_view"


def current_leader(etcd, cluster):
    """The RPC address in the master view, or None."""
    v = etcd.get(view_key(cluster))
    return v.decode() if v else None
