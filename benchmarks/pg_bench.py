"""mooncake.pg bandwidth and latency against gloo, in the same processes and the same run.

The reference's pgbench shape: all-reduce, all-gather, all-to-all and send/recv from 4 KiB to
64 MiB on N ranks of one host (forked from this process), backend ``mooncake-cpu`` (the world
group) and ``gloo`` (a group over the same ranks), alternating per size. Beside them the
machine's limits, measured in the same run by ``mc_limits`` (single-thread memcpy, one
loopback TCP stream).

    python benchmarks/pg_bench.py --ranks 2 4 [--sizes 4K,64K,1M,16M,64M] [--iters 5]

Prints one markdown table per rank count: per op and size, each backend's median time of one
operation and its bus bandwidth (nccl-tests' convention: all-reduce moves 2(n-1)/n of the
buffer per rank, all-gather and all-to-all (n-1)/n, send/recv the buffer once).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

OPS = ["all_reduce", "all_gather", "all_to_all", "send_recv"]


def _size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1], 1)
    return int(s[:-1] if s[-1] in "KMG" else s) * mult


def _fmt(n: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= m:
            return f"{n // m} {unit}"
    return f"{n} B"


def _busfactor(op: str, n: int) -> float:
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "all_to_all": (n - 1) / n}.get(op, 1.0)


def _one(op: str, size: int, group, rank: int, n: int, bufs):
    x, y = bufs
    if op == "all_reduce":
        dist.all_reduce(x, group=group)
    elif op == "all_gather":
        dist.all_gather_into_tensor(y, x, group=group)
    elif op == "all_to_all":
        dist.all_to_all_single(y[: x.numel()], x, group=group)
    else:  # pairs (0,1), (2,3): even ranks send, odd ranks receive
        if rank % 2 == 0:
            dist.send(x, rank + 1, group=group)
        else:
            dist.recv(x, rank - 1, group=group)


def _rank(rank: int, n: int, port: int, sizes, iters: int, q):
    from mooncake import pg

    dist.init_process_group("mooncake-cpu", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            pg_options=pg.MooncakeBackendOptions(n))
    groups = {"mooncake-cpu": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    for size in sizes:
        elems = size // 4
        elems -= elems % n
        # all_gather: each rank contributes size/n so the output is the size
        bufs_for = {
            "all_reduce": (torch.ones(elems), None),
            "all_gather": (torch.ones(elems // n), torch.empty(elems)),
            "all_to_all": (torch.ones(elems), torch.empty(elems)),
            "send_recv": (torch.ones(elems), None),
        }
        for op in OPS:
            times = {b: [] for b in groups}
            for it in range(iters + 1):  # the first of each is a warm-up
                for b, g in groups.items():  # alternating, so drift hits both alike
                    dist.barrier(group=g)
                    t = time.perf_counter()
                    _one(op, size, g, rank, n, bufs_for[op])
                    if op == "send_recv":
                        dist.barrier(group=g)  # the send ends when the receiver has the bytes
                    dt = time.perf_counter() - t
                    if it:
                        times[b].append(dt)
            # the slowest rank's time is the operation's
            for b, g in groups.items():
                med = torch.tensor([statistics.median(times[b])], dtype=torch.float64)
                dist.all_reduce(med, op=dist.ReduceOp.MAX, group=groups["gloo"])
                rows.append({"op": op, "size": elems * 4, "backend": b, "seconds": med.item()})
    dist.barrier()
    if rank == 0:
        q.put(rows)
    dist.destroy_process_group()


def _limits() -> dict:
    exe = shutil.which("mc_limits")
    if exe is None:
        import mooncake

        for d in mooncake.__path__:
            cand = os.path.join(d, "bin", "mc_limits")
            if os.path.exists(cand):
                exe = cand
    if exe is None:
        return {}
    out = subprocess.run([exe, "--json", "--duration", "1"], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def run(n: int, sizes, iters: int):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_rank, args=(r, n, port, sizes, iters, q)) for r in range(n)]
    for p in procs:
        p.start()
    rows = q.get(timeout=3600)
    for p in procs:
        p.join()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args(argv)
    sizes = [_size(s) for s in a.sizes.split(",")]
    lim = _limits()
    print(f"# pg_bench: {' '.join(sys.argv)}")
    print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; torch {torch.__version__}; "
          f"MC_FORCE_TCP={os.environ.get('MC_FORCE_TCP', '')!r}")
    print(f"limits (mc_limits, same run): {json.dumps(lim)}")
    everything = {"limits": lim, "runs": {}}
    for n in a.ranks:
        rows = run(n, sizes, a.iters)
        everything["runs"][n] = rows
        print(f"\n## {n} ranks\n")
        print("| op | size | mooncake-cpu time | mooncake-cpu busbw | gloo time | gloo busbw | mooncake/gloo speed |")
        print("|---|---|---|---|---|---|---|")
        by = {(r["op"], r["size"], r["backend"]): r["seconds"] for r in rows}
        for op in OPS:
            for size in sorted({r["size"] for r in rows}):
                m, g = by[(op, size, "mooncake-cpu")], by[(op, size, "gloo")]
                f = _busfactor(op, n)
                bw = lambda t: f"{size * f / t / 1e9:.2f} GB/s"  # noqa: E731
                print(f"| {op} | {_fmt(size)} | {m * 1e6:.0f} us | {bw(m)} | {g * 1e6:.0f} us | {bw(g)} | {g / m:.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(everything, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
