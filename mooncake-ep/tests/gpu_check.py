"""The device check of mooncake.ep's kernels: ``python gpu_check.py DEVICE_LIB HOST_LIB [--cases N]``.

Runs every entry point of ep_kernels.h in both builds on the same random inputs: DEVICE_LIB
(libmooncake_ep_kernels.so, CUDA tensors) and HOST_LIB (the host reference built from the same
ep_logic.h, CPU tensors), and requires byte-equal outputs. Shapes cover several ranks' layouts
without several GPUs (num_ranks, the destinations sent to and the received counts are inputs):
top-k 1 to 8, repeated and masked experts, destinations not sent to, an expert at capacity, a
destination that did not answer in combine. Then one dispatch + combine through ``Buffer`` on a
one-rank nccl group with CUDA tensors (the kernels path) against a one-rank gloo group with CPU
tensors (the fallback). Prints one line per part and exits non-zero on the first difference.

Self-check without a GPU: DEVICE_LIB may be the host reference too (then CPU tensors are used for
both and the Buffer part is skipped), which runs this script's own logic.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from mooncake.ep import _kernels  # noqa: E402


def random_case(g: torch.Generator, case: int):
    num_ranks = [1, 2, 3, 4, 8][case % 5]
    num_local = [1, 2, 3, 4][case % 4]
    num_experts = num_ranks * num_local
    num_topk = [1, 2, 3, 5, 8][case % 5]
    num_tokens = int(torch.randint(0, 40, (1,), generator=g))
    hidden = 128 * [1, 2, 3][case % 3]
    idx = torch.randint(0, num_experts, (num_tokens, num_topk), generator=g)
    idx[torch.rand(idx.shape, generator=g) < 0.2] = -1
    if num_topk > 1 and num_tokens:
        dup = torch.rand((num_tokens,), generator=g) < 0.25
        idx[dup, 1] = idx[dup, 0]
    x = (torch.randn((num_tokens, hidden), generator=g) * 3).to(torch.bfloat16)
    w = torch.rand(idx.shape, generator=g)
    keep = (torch.rand((num_ranks,), generator=g) < 0.8).tolist()
    answered = (torch.rand((num_ranks,), generator=g) < 0.8).tolist()
    return num_ranks, num_local, num_experts, idx.contiguous(), x, w, keep, answered


def run_lib(kern: "_kernels.Kernels", dev: torch.device, case) -> dict:
    num_ranks, num_local, num_experts, idx, x, w, keep, answered = case
    idx, x, w = idx.to(dev), x.to(dev), w.to(dev)
    count, rank = kern.dispatch_count(idx, num_experts)
    per_dest = count.view(num_ranks, num_local).sum(dim=1).tolist()
    send_counts = [c if keep[d] else 0 for d, c in enumerate(per_dest)]
    rows, meta, slot_pos = kern.dispatch_pack(x, idx, num_experts, num_ranks, count, rank, keep, sum(send_counts))
    # This rank's send buffer stands for what it received from num_ranks sources: the rows split
    # into num_ranks consecutive blocks, local experts as sent (capacity: every row may land in one).
    recv_counts = [len(range(s, rows.shape[0], num_ranks)) for s in range(num_ranks)]
    packed, rcount, src_info, layout = kern.dispatch_recv(rows, meta, recv_counts, num_local, num_ranks,
                                                          max(1, rows.shape[0]))  # fmt: skip
    got_parts, shift, skipped, start = [], [], 0, 0
    for d in range(num_ranks):
        block = rows[start : start + send_counts[d]]
        start += send_counts[d]
        if answered[d]:
            got_parts.append(block)
            shift.append(skipped)
        else:
            shift.append(-1)
            skipped += send_counts[d]
    got = torch.cat(got_parts) if got_parts else rows[:0]
    out = kern.combine(got, idx, w, slot_pos, shift, num_local, x.shape[1])
    result = dict(count=count, rank=rank, rows=rows.view(torch.int16), meta=meta, slot_pos=slot_pos,
                  packed=packed.view(torch.int16), rcount=rcount, src_info=src_info, layout=layout,
                  out=out.view(torch.int16))  # fmt: skip
    return {k: v.cpu() for k, v in result.items()}


def buffer_round(backend: str, dev: torch.device, init: str):
    from mooncake.ep import Buffer

    dist.init_process_group(backend, init_method=f"file://{init}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))  # fmt: skip
    try:
        g = torch.Generator().manual_seed(7)
        x = (torch.randn((24, 256), generator=g) * 3).to(torch.bfloat16)
        idx = torch.randint(0, 6, (24, 4), generator=g)
        idx[torch.rand(idx.shape, generator=g) < 0.2] = -1
        w = torch.rand(idx.shape, generator=g)
        buf = Buffer(dist.group.WORLD)
        recv, count, handle, _, _ = buf.dispatch(x.to(dev), idx.to(dev), None, 24, 6, use_fp8=False)
        y = (recv.float() * 1.5).to(torch.bfloat16)
        out, _, _ = buf.combine(y, idx.to(dev), w.to(dev), None, -1, handle)
        return buf.last_path, {"recv": recv.view(torch.int16).cpu(), "count": count.cpu(), "out": out.view(torch.int16).cpu()}
    finally:
        dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("device_lib")
    ap.add_argument("host_lib")
    ap.add_argument("--cases", type=int, default=200)
    args = ap.parse_args()
    dlib, hlib = _kernels.Kernels(args.device_lib), _kernels.Kernels(args.host_lib)
    assert hlib.device == "cpu", f"{args.host_lib} is not the host reference"
    ddev = torch.device("cuda", 0) if dlib.device == "cuda" else torch.device("cpu")
    print(f"device library: {dlib.name} ({args.device_lib}) on {ddev}; host reference: {args.host_lib}")
    g = torch.Generator().manual_seed(2026)
    rows = 0
    for i in range(args.cases):
        case = random_case(g, i)
        a, b = run_lib(dlib, ddev, case), run_lib(hlib, torch.device("cpu"), case)
        differ = [k for k in a if a[k].shape != b[k].shape or not torch.equal(a[k], b[k])]
        if differ:
            print(f"FAIL case {i}: {differ} differ (ranks {case[0]}, local experts {case[1]}, idx shape {tuple(case[3].shape)})")
            return 1
        rows += int(a["rcount"].sum())
    print(f"ABI: {args.cases} random cases byte-equal between the builds ({rows} rows packed)")
    if dlib.device != "cuda":
        print("Buffer: skipped (no CUDA library given)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[_kernels.ENV] = args.device_lib
        kpath, k = buffer_round("nccl", ddev, os.path.join(tmp, "nccl"))
        os.environ.pop(_kernels.ENV)
        fpath, f = buffer_round("gloo", torch.device("cpu"), os.path.join(tmp, "gloo"))
    differ = [n for n in k if not torch.equal(k[n], f[n])]
    print(f"Buffer: {kpath} (nccl, cuda) vs {fpath} (gloo, cpu): " + ("byte-equal" if not differ else f"DIFFER in {differ}"))
    return 1 if differ or kpath != "CUDA kernels" or fpath != "fallback" else 0


if __name__ == "__main__":
    sys.exit(main())
