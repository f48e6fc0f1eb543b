"""Master HA on this host: put throughput with HA on and off, and failover times, in one run.

Starts a 3-member etcd cluster on loopback (Debian's etcd-server), three ``mooncake_master
--enable_ha`` and one storage client, then:

1. put throughput and latency per call through ``mooncake_store_bench`` against the HA cluster
   (``etcd://...``: every put start and end is recorded in etcd before its reply) and against a
   master without HA started by the bench itself, same value size, batch and threads;
2. the limit HA runs against, measured in the same run: etcd's own write rate from the same
   number of threads (one put per request through its JSON gateway, as the master writes);
3. failovers: a client puts small values in a loop while the leader is killed with SIGKILL;
   for each round, the time until the master view names another master, and the client's
   outage (its last put acknowledged before the kill to its first after). The killed master is
   started again as a standby before the next round.

Usage (repository root, package installed): ``python benchmarks/ha_failover.py``; see --help.
"""

import argparse
import base64
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests" / "integration" / "engine"))
sys.path.insert(0, str(ROOT / "python" / "tests" / "integration" / "store"))
from etcd_helpers import EtcdCluster  # noqa: E402
from ha_helpers import HaMaster, current_leader  # noqa: E402


def bench(args, master, env, extra=()):
    cmd = [sys.executable, "-m", "mooncake.cli.store_bench", "--operation=put",
           f"--value_size={args.value_size}", f"--batch={args.batch}",
           f"--threads={args.threads}", f"--duration={args.duration}", "--protocol=tcp", "--json",
           *([f"--master={master}"] if master else []), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"bench failed: {r.stderr[-2000:]}")
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    text = "\n".join(ln for ln in lines if not ln.startswith("{"))
    result = json.loads([ln for ln in lines if ln.startswith("{")][-1])
    return "$ mooncake_store_bench " + " ".join(cmd[3:]) + "\n" + text, result


def etcd_write_rate(etcd, threads, seconds, size):
    """Puts/s that etcd takes from `threads` threads, one put per HTTP request."""
    url = f"http://127.0.0.1:{etcd.client[etcd.leader() or etcd.names[0]]}/v3/kv/put"
    value = base64.b64encode(b"x" * size).decode()
    stop = time.monotonic() + seconds
    counts, lat = [0] * threads, []

    def run(t):
        i = 0
        while time.monotonic() < stop:
            body = json.dumps({"key": base64.b64encode(f"bench/{t}/{i}".encode()).decode(),
                               "value": value}).encode()
            t0 = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"),
                                        timeout=5) as r:
                r.read()
            lat.append(time.perf_counter() - t0)
            counts[t] += 1
            i += 1

    th = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    t0 = time.monotonic()
    for t in th:
        t.start()
    for t in th:
        t.join()
    took = time.monotonic() - t0
    lat.sort()
    return sum(counts) / took, lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6


def failover_round(etcd, cid, masters, store):
    old = next(m for m in masters if m.leading)
    acked, stop = [], threading.Event()

    def putter():
        i = 0
        while not stop.is_set():
            if store.put(f"fo-{uuid.uuid4().hex[:6]}-{i}", b"f" * 1024) == 0:
                acked.append(time.monotonic())
            i += 1

    th = threading.Thread(target=putter)
    th.start()
    time.sleep(1.0)
    t_kill = time.monotonic()
    old.proc.kill()
    old.proc.wait()
    t_view = None
    while time.monotonic() - t_kill < 60:
        lead = current_leader(etcd, cid)
        if lead and lead != old.addr and any(m.leading and m.addr == lead for m in masters):
            t_view = time.monotonic()
            break
        time.sleep(0.01)
    while time.monotonic() - t_kill < 60 and not (acked and acked[-1] > t_kill):
        time.sleep(0.01)
    time.sleep(0.5)
    stop.set()
    th.join()
    before = [t for t in acked if t <= t_kill]
    after = [t for t in acked if t > t_kill]
    if t_view is None or not after:
        raise RuntimeError("no failover within 60 s")
    # the killed master comes back as a standby for the next round
    masters[masters.index(old)] = HaMaster(etcd.endpoints, cid, lease_s=old_lease(old))
    return t_view - t_kill, after[0] - (before[-1] if before else t_kill)


def old_lease(m):
    return int(re.search(r"--ha_lease_ttl_sec=(\d+)", " ".join(m.cmd)).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--value_size", default="4kb")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3, help="failovers to time")
    p.add_argument("--lease", type=int, default=3, help="--ha_lease_ttl_sec of the masters")
    args = p.parse_args()
    from mooncake.store import MooncakeDistributedStore

    etcd = EtcdCluster(3)
    cid = f"bench-{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, MC_STORE_CLUSTER_ID=cid)
    os.environ["MC_STORE_CLUSTER_ID"] = cid
    masters, node, store = [], None, None
    try:
        masters = [HaMaster(etcd.endpoints, cid, lease_s=args.lease) for _ in range(3)]
        deadline = time.monotonic() + 20
        while sum(m.leading for m in masters) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        node = subprocess.Popen([sys.executable, "-m", "mooncake.cli.store_bench",
                                 f"--_storage_node={etcd.url}", "--segment_size=512mb",
                                 "--protocol=tcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=env)
        if not node.stdout.readline().startswith("ready"):
            raise RuntimeError("storage client did not start")
        print(f"# etcd: 3 members {etcd.endpoints}; masters: 3 with --ha_lease_ttl_sec="
              f"{args.lease}; loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}")
        out_on, on = bench(args, etcd.url, env, ["--no_limits"])
        print("# HA on (etcd:// master)\n" + out_on)
        out_off, off = bench(args, "", env)
        print("# HA off (the bench's own master)\n" + out_off)
        rate, p50, p99 = etcd_write_rate(etcd, args.threads, args.duration, 256)
        print(f"# etcd's own limit: {rate:.0f} puts/s from {args.threads} threads "
              f"(p50 {p50:.0f} us, p99 {p99:.0f} us per put)")
        print(f"# ratio HA on / off: {on['ops_per_s'] / off['ops_per_s']:.2f}x ops/s; "
              f"HA on master RPCs/s (2 per put call) / etcd puts/s: "
              f"{2 * on['ops_per_s'] / args.batch / rate:.2f}x")
        store = MooncakeDistributedStore()
        if store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", etcd.url) != 0:
            raise RuntimeError("client setup failed")
        views, outages = [], []
        for r in range(args.rounds):
            v, o = failover_round(etcd, cid, masters, store)
            views.append(v)
            outages.append(o)
            print(f"# failover {r + 1}: new leader in the view after {v:.2f} s, client outage "
                  f"{o:.2f} s")
        print(f"# failover (kill -9 the leader, lease {args.lease} s, {args.rounds} rounds): "
              f"view p50 {statistics.median(views):.2f} s max {max(views):.2f} s; "
              f"client outage p50 {statistics.median(outages):.2f} s max {max(outages):.2f} s")
    finally:
        if store:
            store.close()
        if node:
            node.stdin.close()
            node.wait(timeout=20)
        for m in masters:
            m.stop()
        etcd.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
