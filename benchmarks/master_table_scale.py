"""What the size of the master's object table costs a client: the same master and client, with
an empty table and with N objects in it, in one run, and the ratio of each figure.

  python benchmarks/master_table_scale.py [--objects 1000000] [--ops 3000] [--master PATH]

The client is a storage client (it contributes the segment its puts land in, so a put is its
copy plus one commit to the master: the master's share of the time is the point). For each
table size it prints 4 KiB put throughput and latency (p50, p99), the master's CPU while the
puts run, and the master's CPU in the 2 s after them while the client still holds its put slots
(idle: what the master's own periodic passes cost). The empty table is the baseline each row is
read against. With --evicting N it also fills a cache twice over (N small objects into room for
N/2) and prints the batches' latency: what an eviction pass costs the puts that wait for it.
docs/performance.md records a run.
"""

import argparse
import os
import socket
import subprocess
import sys
import time

from mooncake.cli import binary_path
from mooncake.store import MooncakeDistributedStore


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_listening(port, deadline_s=30.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the master never listened on {port}")


def measure(master_bin, objects, ops):
    port = free_port()
    master = subprocess.Popen([master_bin, f"--port={port}", "--rpc_address=127.0.0.1",
                               "--http_metadata_server_port=0", "--metrics_port=0",
                               "--enable_metric_reporting=false"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = MooncakeDistributedStore()
    try:
        wait_listening(port)
        seg = max(256 << 20, (objects * 128 + ops * 4096) * 2)
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", seg, 64 << 20, "tcp", "", f"127.0.0.1:{port}")
        if rc != 0:
            raise SystemExit(f"setup failed: {rc}")
        small = b"f" * 64
        t = time.monotonic()
        for i in range(0, objects, 512):
            keys = [f"fill-{j}" for j in range(i, min(objects, i + 512))]
            if store.put_batch(keys, [small] * len(keys)) != 0:
                raise SystemExit("filling the table failed")
        fill_s = time.monotonic() - t
        value = b"v" * 4096
        lat = []
        c0, t0 = cpu_seconds(master.pid), time.monotonic()
        for i in range(ops):
            s = time.perf_counter()
            if store.put(f"k-{i}", value) != 0:
                raise SystemExit("put failed")
            lat.append(time.perf_counter() - s)
        busy_s = time.monotonic() - t0
        c1 = cpu_seconds(master.pid)
        time.sleep(2.0)
        c2 = cpu_seconds(master.pid)
        lat.sort()
        return {"objects": objects, "fill_s": fill_s, "ops_s": ops / busy_s,
                "p50_us": lat[len(lat) // 2] * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
                "master_busy_pct": (c1 - c0) / busy_s * 100, "master_idle_pct": (c2 - c1) / 2.0 * 100}
    finally:
        store.close()
        master.kill()
        master.wait()


def measure_evicting(master_bin, objects):
    """Batches of 256 64-byte puts into a segment that holds half of `objects`: from half-way on,
    eviction runs all the time (the state of a cache that is full), and a put that finds no room
    waits for an eviction pass. Returns the batches' latency percentiles and the master's count
    of evicted objects."""
    port = free_port()
    master = subprocess.Popen([master_bin, f"--port={port}", "--rpc_address=127.0.0.1",
                               "--http_metadata_server_port=0", "--metrics_port=0",
                               "--enable_metric_reporting=false", "--default_kv_lease_ttl=0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = MooncakeDistributedStore()
    try:
        wait_listening(port)
        seg = max(16 << 20, objects // 2 * 64)
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", seg, 64 << 20, "tcp", "", f"127.0.0.1:{port}")
        if rc != 0:
            raise SystemExit(f"setup failed: {rc}")
        value = b"e" * 64
        lat = []
        t0 = time.monotonic()
        for i in range(0, objects, 256):
            keys = [f"e-{j}" for j in range(i, min(objects, i + 256))]
            s = time.perf_counter()
            store.put_batch(keys, [value] * len(keys))
            lat.append(time.perf_counter() - s)
        elapsed = time.monotonic() - t0
        lat.sort()
        return {"objects": objects, "segment_mib": seg >> 20, "keys_s": objects / elapsed,
                "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3,
                "max_ms": lat[-1] * 1e3}
    finally:
        store.close()
        master.kill()
        master.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=1_000_000)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--evicting", type=int, default=0, metavar="N",
                    help="also put N 64-byte objects into room for N/2 (a full cache: eviction "
                         "all the time) and print the batches' latency (0: skip)")
    ap.add_argument("--master", default=None, help="mooncake_master to run (default: the bundled one)")
    a = ap.parse_args()
    if a.objects < 0 or a.ops < 100:
        ap.error("--objects must be >= 0 and --ops >= 100")
    master_bin = a.master or binary_path("mooncake_master")
    base = measure(master_bin, 0, a.ops)
    big = measure(master_bin, a.objects, a.ops)
    print(f"master: {master_bin}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}")
    print("| objects in the table | fill s | 4 KiB puts/s | p50 us | p99 us | master CPU while putting"
          " | master CPU idle, slots held |")
    print("|---|---|---|---|---|---|---|")
    for r in (base, big):
        print(f"| {r['objects']} | {r['fill_s']:.1f} | {r['ops_s']:.0f} | {r['p50_us']:.0f} | "
              f"{r['p99_us']:.0f} | {r['master_busy_pct']:.0f}% | {r['master_idle_pct']:.0f}% |")
    print(f"| ratio (N / empty) | | {big['ops_s'] / base['ops_s']:.2f} | "
          f"{big['p50_us'] / base['p50_us']:.2f} | {big['p99_us'] / base['p99_us']:.2f} | | |")
    if a.evicting:
        r = measure_evicting(master_bin, a.evicting)
        print()
        print(f"full cache: {r['objects']} puts of 64 B in batches of 256 into {r['segment_mib']} MiB"
              " (eviction from half-way on)")
        print("| keys/s | batch p50 ms | batch p99 ms | batch max ms |")
        print("|---|---|---|---|")
        print(f"| {r['keys_s']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
