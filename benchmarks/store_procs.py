"""Aggregate store throughput with 1..N client processes on this host.

    python benchmarks/store_procs.py [--procs 1,2,4,8] [--op get] [--size 4kb] [--seconds 3]

Starts its own mooncake_master and one holder (a storage client contributing a 256 MiB segment,
mooncake_client), then for each process count P starts P driver processes (pure clients: every
byte crosses to the holder). Each driver writes its own pool of 256 keys (untimed), says it is
ready, and on a common start signal runs single get (or put: fresh keys, removed between
rounds) calls for --seconds; the printed figure is the sum of the calls over the common window.
Gets re-read the pool, so the replica-location cache answers for nearly every call (the master
is asked once per key per cache window). Prints the load average before each count.
"""

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

UNITS = {"kb": 1 << 10, "mb": 1 << 20}


def size_of(text):
    t = text.strip().lower()
    for u, m in UNITS.items():
        if t.endswith(u):
            return int(t[:-len(u)]) * m
    return int(t)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def driver(a):
    from mooncake.store import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    if s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 << 20, "tcp", "", a.master) != 0:
        raise SystemExit("setup failed")
    value = os.urandom(a.size)
    tag = f"p{os.getpid()}"
    # 256 keys, fewer for large values (about 96 MiB per process at most)
    keys = [f"{tag}-{i}" for i in range(max(4, min(256, (96 << 20) // a.size)))]
    if a.op == "get":
        for k in keys:
            if s.put(k, value) != 0:
                raise SystemExit("put failed")
        if s.get(keys[0]) != value:
            raise SystemExit("value read back differs")
    print("ready", flush=True)
    sys.stdin.readline()
    n = 0
    rnd = 0
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        if a.op == "get":
            for k in keys:
                if len(s.get(k)) != a.size:
                    raise SystemExit("get failed")
            n += len(keys)
        else:
            ks = [f"{tag}-r{rnd}-{i}" for i in range(max(2, min(64, (32 << 20) // a.size)))]
            for k in ks:
                if s.put(k, value) != 0:
                    raise SystemExit("put failed")
            n += len(ks)
            for k in ks:
                s.remove(k)
            rnd += 1
    print(n, flush=True)
    sys.stdin.readline()
    s.close()


def run_count(a, procs):
    me = os.path.abspath(__file__)
    cmd = [sys.executable, me, "--_driver", "--master", a.master, "--op", a.op,
           "--size", str(a.size), "--seconds", str(a.seconds)]
    ds = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
          for _ in range(procs)]
    try:
        for d in ds:
            if d.stdout.readline().strip() != "ready":
                raise SystemExit("a driver did not start")
        for d in ds:
            d.stdin.write("go\n")
            d.stdin.flush()
        total = sum(int(d.stdout.readline()) for d in ds)
        for d in ds:
            d.stdin.write("end\n")
            d.stdin.flush()
    finally:
        for d in ds:
            try:
                d.stdin.close()
            except OSError:
                pass
            d.wait(timeout=30)
    return total / a.seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", default="1,2,4,8")
    p.add_argument("--op", choices=["get", "put"], default="get")
    p.add_argument("--size", type=size_of, default=4096)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--master", default="")
    p.add_argument("--_driver", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._driver:
        driver(a)
        return
    from mooncake.cli import binary_path
    port = free_port()
    a.master = f"127.0.0.1:{port}"
    master = subprocess.Popen([binary_path("mooncake_master"), f"--port={port}",
                               "--metrics_port=0", "--rpc_address=127.0.0.1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    holder = None
    try:
        for line in master.stdout:
            if "listening on rpc" in line:
                break
        threading.Thread(target=master.stdout.read, daemon=True).start()
        holder = subprocess.Popen([binary_path("mooncake_client"),
                                   f"--master_server_address={a.master}", "--host=127.0.0.1",
                                   "--metadata_server=P2PHANDSHAKE",
                                   "--global_segment_size=256mb", f"--port={free_port()}"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in holder.stdout:
            if "serving dummy clients" in line:
                break
        threading.Thread(target=holder.stdout.read, daemon=True).start()
        for procs in [int(x) for x in a.procs.split(",")]:
            load = os.getloadavg()
            rate = run_count(a, procs)
            print(f"{a.op} {a.size} B, {procs} process(es): {rate:,.0f} op/s aggregate, "
                  f"{rate * a.size / 1e9:.3f} GB/s ({rate / procs:,.0f} op/s each; "
                  f"loadavg before {load[0]:.2f})", flush=True)
    finally:
        for pr in (holder, master):
            if pr and pr.poll() is None:
                pr.terminate()
                pr.wait(timeout=15)


if __name__ == "__main__":
    main()
