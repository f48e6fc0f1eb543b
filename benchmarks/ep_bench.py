"""mooncake.ep dispatch + combine: rows through the Transfer Engine against the group's
all_to_all_single, and memcpy of the same bytes, in the same processes and the same run.

N CPU ranks of one host (spawned from this process) on one gloo group. Per shape (tokens per
rank, hidden, top-k, experts = 2 per rank), ``Buffer.dispatch`` then ``Buffer.combine`` with
identity experts, bf16 (``use_fp8=False``), on three buffers over the same group whose rows move
through: the Transfer Engine over tcp (``te-tcp``), the Transfer Engine with its automatic choice
(``te-auto``: shm between processes of one host), and the group (``pg``, the fallback); the
three alternate per iteration. ``memcpy`` is one ``torch`` copy, on each rank, of as many bytes as
that rank's dispatch and combine moved (rows sent to other ranks plus rows received from them).

    python benchmarks/ep_bench.py --ranks 2 4 [--tokens 1,16,128,512] [--hidden 4096] [--topk 4] [--iters 20]

Prints one markdown table per rank count: per shape and path, the median (over iterations) of the
slowest rank's dispatch, combine and dispatch + combine time, and GB/s: the bytes the slowest rank
moved to and from other ranks in dispatch + combine, divided by that time. "dispatch's rows alone"
times only the transport: the metadata round and one exchange of dispatch's rows (no packing,
no per-expert layout), from the second iteration on.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

PATHS = [("te-tcp", "te", "tcp"), ("te-auto", "te", "auto"), ("pg", "pg", "")]


def _worker(rank: int, world: int, init: str, args: argparse.Namespace, q) -> None:
    import torch
    import torch.distributed as dist

    from mooncake.ep import Buffer

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))  # fmt: skip
    group = dist.group.WORLD
    bufs = {}
    for name, mode, protocol in PATHS:
        os.environ["MC_EP_TRANSPORT"] = mode
        os.environ["MC_EP_TE_PROTOCOL"] = protocol or "auto"
        bufs[name] = Buffer(group)
        want = "process group" if mode == "pg" else f"Transfer Engine ({protocol})"
        assert bufs[name].transport_name == want, (name, bufs[name].transport_name)
    results = []
    ne = 2 * world
    for tokens in args.tokens:
        g = torch.Generator().manual_seed(rank * 7919 + tokens)
        x = torch.randn((tokens, args.hidden), generator=g).to(torch.bfloat16)
        idx = torch.stack([torch.randperm(ne, generator=g)[: args.topk] for _ in range(tokens)])
        w = torch.full((tokens, args.topk), 1.0 / args.topk)
        times = {name: ([], [], []) for name in [p[0] for p in PATHS] + ["memcpy"]}
        rows_only = {p[0]: [] for p in PATHS}
        moved = 0
        counts = None
        for it in range(args.warmup + args.iters):
            for name, _, _ in PATHS:
                buf = bufs[name]
                dist.barrier(group)
                t0 = time.perf_counter()
                recv, count, handle, _, _ = buf.dispatch(x, idx, None, tokens, ne, -1, use_fp8=False)
                t1 = time.perf_counter()
                out, _, _ = buf.combine(recv, idx, w, None, -1, handle)
                t2 = time.perf_counter()
                if it >= args.warmup:
                    times[name][0].append(t1 - t0)
                    times[name][1].append(t2 - t1)
                    times[name][2].append(t2 - t0)
                if counts is not None:
                    # The rows alone: the metadata round and one exchange of dispatch's rows.
                    ex = buf._exchange
                    rb = 2 * args.hidden + 16
                    payload = torch.zeros((sum(counts), rb), dtype=torch.uint8)
                    dist.barrier(group)
                    t3 = time.perf_counter()
                    _, recv_counts = ex.agree(counts, [1] * world, [rb], ["row"], row_bytes=rb)
                    ex.rows_of([payload], counts, recv_counts)
                    if it >= args.warmup:
                        rows_only[name].append(time.perf_counter() - t3)
                if it == 0 and name == "pg":
                    plan = handle.plan
                    counts = list(plan.send_counts)
                    remote_sent = sum(c for d, c in enumerate(plan.send_counts) if d != rank)
                    remote_recv = sum(c for s, c in enumerate(plan.recv_counts) if s != rank)
                    # dispatch: rows (+16 B of routing each) out and in; combine: the same rows back.
                    moved = (remote_sent + remote_recv) * (2 * args.hidden + 16) + (remote_sent + remote_recv) * 2 * args.hidden
            src = torch.empty((max(moved, 1),), dtype=torch.uint8)
            dst = torch.empty_like(src)
            dist.barrier(group)
            t0 = time.perf_counter()
            dst.copy_(src)
            t1 = time.perf_counter()
            if it >= args.warmup:
                for k in range(3):
                    times["memcpy"][k].append(t1 - t0)
        results.append((tokens, moved, times, rows_only))
    gathered = [None] * world
    dist.all_gather_object(gathered, results, group=group)
    if rank == 0:
        q.put(gathered)
    for buf in bufs.values():
        del buf
    dist.destroy_process_group()


def _table(world: int, args: argparse.Namespace, gathered) -> str:
    lines = [
        f"### {world} CPU ranks, hidden {args.hidden}, top-k {args.topk}, {2 * world} experts, bf16, "
        f"median of {args.iters} iterations (slowest rank)",
        "",
        "| tokens/rank | bytes moved (slowest rank) | path | dispatch | combine | dispatch + combine | GB/s "
        "| dispatch's rows alone | GB/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, tokens in enumerate(args.tokens):
        moved = max(g[i][1] for g in gathered)
        for name in [p[0] for p in PATHS] + ["memcpy"]:
            cols = []
            for k in range(3):
                per_iter = [max(g[i][2][name][k][j] for g in gathered) for j in range(args.iters)]
                cols.append(statistics.median(per_iter))
            gbs = moved / cols[2] / 1e9 if cols[2] > 0 else 0.0
            d, c = ("-", "-") if name == "memcpy" else (f"{cols[0] * 1e3:.3f} ms", f"{cols[1] * 1e3:.3f} ms")
            alone, agbs = "-", "-"
            if name != "memcpy":
                # dispatch's rows: half of what dispatch + combine moved, plus their 16 B of routing
                half = moved * (2 * args.hidden + 16) // (4 * args.hidden + 16)
                per_iter = [max(g[i][3][name][j] for g in gathered) for j in range(args.iters - 1)]
                t = statistics.median(per_iter) if per_iter else 0.0
                alone, agbs = f"{t * 1e3:.3f} ms", f"{half / t / 1e9:.2f}" if t > 0 else "-"
            lines.append(f"| {tokens} | {moved} | {name} | {d} | {c} | {cols[2] * 1e3:.3f} ms | {gbs:.2f} "
                         f"| {alone} | {agbs} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--tokens", type=lambda s: [int(v) for v in s.split(",")], default=[1, 16, 128, 512])
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"# mooncake.ep bench: {' '.join(sys.argv)}  (host cores: {os.cpu_count()}, load average at start: {load})\n")
    for world in args.ranks:
        if args.topk > 2 * world:
            print(f"skipping {world} ranks: top-k {args.topk} > {2 * world} experts")
            continue
        with tempfile.TemporaryDirectory() as d:
            q = ctx.Queue()
            procs = [ctx.Process(target=_worker, args=(r, world, os.path.join(d, "init"), args, q)) for r in range(world)]
            for p in procs:
                p.start()
            gathered = q.get(timeout=1800)
            for p in procs:
                p.join(timeout=120)
                if p.is_alive():
                    p.kill()
            if any(p.exitcode for p in procs):
                print(f"a rank failed: exit codes {[p.exitcode for p in procs]}", file=sys.stderr)
                return 1
        print(_table(world, args, gathered) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
