"""What the opt-in cluster secret costs: the same master, storage node and client, run without
and with the secret in one run, and the ratio of each figure.

  python benchmarks/auth_cost.py [--ops 2000] [--setups 30]

Measures a client's setup() (connect to the master, handshake, first heartbeat), and 4 KiB put
and get latency (p50, p99) plus throughput over tcp, where the engine's pooled connections have
done their handshake once. Prints a markdown table; docs/security.md records a run.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from mooncake.cli import binary_path

NODE = """
import sys, time
from mooncake.store import MooncakeDistributedStore
s = MooncakeDistributedStore()
assert s.setup('127.0.0.1', 'P2PHANDSHAKE', 256 << 20, 0, 'tcp', '', sys.argv[1]) == 0
print('ready', flush=True)
sys.stdin.read()
s.close()
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def start_master(secret_file):
    cmd = [binary_path("mooncake_master"), "--port=0", "--metrics_port=0",
           "--rpc_address=127.0.0.1", "--enable_metric_reporting=false"]
    if secret_file:
        cmd.append(f"--cluster_secret_file={secret_file}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        m = re.search(r"listening on rpc [\d.]+:(\d+)", line)
        if m:
            return proc, f"127.0.0.1:{m.group(1)}"
    raise RuntimeError("master did not start")


def run(secret, args):
    from mooncake.store import MooncakeDistributedStore
    env_before = os.environ.get("MC_CLUSTER_SECRET")
    secret_file = None
    if secret:
        fd, secret_file = tempfile.mkstemp()
        os.write(fd, secret.encode())
        os.close(fd)
        os.environ["MC_CLUSTER_SECRET"] = secret
    else:
        os.environ.pop("MC_CLUSTER_SECRET", None)
    master, addr = start_master(secret_file)
    node = subprocess.Popen([sys.executable, "-c", NODE, addr], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert node.stdout.readline().strip() == "ready"
        setups = []
        for _ in range(args.setups):
            s = MooncakeDistributedStore()
            t0 = time.perf_counter()
            assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", addr) == 0
            setups.append(time.perf_counter() - t0)
            s.close()
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", addr) == 0
        value = b"v" * 4096
        put, get = [], []
        t_all = time.perf_counter()
        for i in range(args.ops):
            t0 = time.perf_counter()
            assert s.put(f"k{i}", value) == 0
            put.append(time.perf_counter() - t0)
        put_s = time.perf_counter() - t_all
        t_all = time.perf_counter()
        for i in range(args.ops):
            t0 = time.perf_counter()
            assert len(s.get(f"k{i}")) == 4096
            get.append(time.perf_counter() - t0)
        get_s = time.perf_counter() - t_all
        s.close()
    finally:
        node.stdin.close()
        node.wait(timeout=10)
        master.terminate()
        master.wait(timeout=10)
        if secret_file:
            os.unlink(secret_file)
        if env_before is None:
            os.environ.pop("MC_CLUSTER_SECRET", None)
        else:
            os.environ["MC_CLUSTER_SECRET"] = env_before
    us = 1e6
    return {"setup p50 (us)": statistics.median(setups) * us,
            "setup p99 (us)": pct(setups, 99) * us,
            "put 4 KiB p50 (us)": pct(put, 50) * us, "put 4 KiB p99 (us)": pct(put, 99) * us,
            "put 4 KiB ops/s": args.ops / put_s,
            "get 4 KiB p50 (us)": pct(get, 50) * us, "get 4 KiB p99 (us)": pct(get, 99) * us,
            "get 4 KiB ops/s": args.ops / get_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--setups", type=int, default=30)
    args = ap.parse_args()
    plain = run(None, args)
    secret = run("auth-cost-benchmark-secret", args)
    print("| figure | no secret | cluster secret | ratio (secret / none) |")
    print("|---|---:|---:|---:|")
    for k in plain:
        print(f"| {k} | {plain[k]:.1f} | {secret[k]:.1f} | {secret[k] / plain[k]:.3f} |")


if __name__ == "__main__":
    main()
