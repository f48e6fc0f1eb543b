"""One rank of the kernels-vs-fallback test: ``python ep_kernel_workers.py RANK WORLD INIT_FILE OUT_DIR LIB``.

Every scenario runs ``Buffer.dispatch`` and ``Buffer.combine`` twice on the same inputs on one gloo
group: once on the fallback (``$MC_EP_KERNELS_LIB`` unset) and once on the kernels library LIB
(the host reference build of mooncake-ep, which runs the CUDA kernels' per-element logic on the
CPU). Each rank writes ``OUT_DIR/kernels.<rank>.json``: per scenario, the path each run took and
every output that differs between them (byte-exact comparison), or the traceback it raised.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

from mooncake.ep import Buffer, get_ep_buffer_size_hint


def routing(g: torch.Generator, num_tokens: int, num_topk: int, num_experts: int) -> torch.Tensor:
    """Random top-k choices with masked slots (-1) and, now and then, an expert listed twice."""
    idx = torch.randint(0, num_experts, (num_tokens, num_topk), generator=g)
    idx[torch.rand((num_tokens, num_topk), generator=g) < 0.15] = -1
    if num_topk > 1 and num_tokens:
        dup = torch.rand((num_tokens,), generator=g) < 0.2
        idx[dup, 1] = idx[dup, 0]
    return idx.contiguous()


def one_run(group, world, x, idx, w, max_tokens, ne, lib, active, combine_active, use_fp8, zero_copy, use_out):
    if lib:
        os.environ["MC_EP_KERNELS_LIB"] = lib
    else:
        os.environ.pop("MC_EP_KERNELS_LIB", None)
    buf = Buffer(group, get_ep_buffer_size_hint(max_tokens, x.shape[1], world, ne))
    act = None if active is None else torch.tensor(active, dtype=torch.int32)
    recv, count, handle, _, _ = buf.dispatch(x, idx, act, max_tokens, ne, -1, use_fp8=use_fp8)
    paths = [buf.last_path]
    packed = recv[0].float() if use_fp8 else recv
    scales = recv[1] if use_fp8 else torch.zeros(0)
    # The mock expert e multiplies its rows by 1 + e / 8; rows past each count stay as dispatched.
    num_local = ne // world
    factor = 1.0 + (dist.get_rank(group) * num_local + torch.arange(num_local)).float() / 8.0
    y = (packed.float() * factor.view(-1, 1, 1)).to(torch.bfloat16)
    cact = None if combine_active is None else torch.tensor(combine_active, dtype=torch.int32)
    out = torch.full((x.shape[0], x.shape[1]), 7.0, dtype=torch.bfloat16) if use_out else None
    if zero_copy:
        buf.get_next_combine_buffer(handle).copy_(y)
    combined, _, _ = buf.combine(y, idx, w, cact, -1, handle, zero_copy=zero_copy, out=out)
    paths.append(buf.last_path)
    outputs = {
        "recv_x": recv[0].view(torch.uint8) if use_fp8 else recv.view(torch.int16),
        "scales": scales,
        "count": count,
        "src_info": handle[0],
        "layout_range": handle[1],
        "combined": combined.view(torch.int16),
        "dispatch_active": torch.zeros(0) if act is None else act,
        "combine_active": torch.zeros(0) if cact is None else cact,
    }
    if use_out:
        outputs["out_is_combined"] = torch.tensor([combined.data_ptr() == out.data_ptr()])
    return paths, outputs


def scenario(group, rank, world, lib, seed, max_tokens, num_tokens, num_topk, ne, hidden, active=None,
             combine_active=None, use_fp8=False, zero_copy=False, use_out=False, idx=None):  # fmt: skip
    g = torch.Generator().manual_seed(seed * 131 + rank)
    x = (torch.randn((num_tokens, hidden), generator=g) * 4).to(torch.bfloat16)
    idx = routing(g, num_tokens, num_topk, ne) if idx is None else idx
    w = torch.rand((num_tokens, num_topk), generator=g, dtype=torch.float32)
    runs = [
        one_run(group, world, x, idx, w, max_tokens, ne, path, active, combine_active, use_fp8, zero_copy, use_out)
        for path in ("", lib)
    ]
    (fb_paths, fb), (k_paths, k) = runs
    differ = [name for name in fb if fb[name].shape != k[name].shape or not torch.equal(fb[name].cpu(), k[name].cpu())]
    return {"paths": fb_paths + k_paths, "differ": differ, "rows": int(k["count"].sum()), "tokens": num_tokens}


def main() -> None:
    rank, world, init_file, out, lib = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )  # fmt: skip
    group = dist.group.WORLD
    last = world - 1
    cases = {}
    # Random shapes: every rank draws the same shape from the seed, its own tokens and routing.
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        max_tokens = int(torch.randint(1, 24, (1,), generator=g))
        num_topk = [1, 2, 3, 5, 8, 4][seed]
        ne = world * [1, 2, 4, 3, 8, 2][seed]
        hidden = 128 * [1, 2, 1, 3, 1, 2][seed]
        tokens = int(torch.randint(1, max_tokens + 1, (1,), generator=torch.Generator().manual_seed(seed * 7 + rank)))
        cases[f"random{seed}"] = dict(seed=seed, max_tokens=max_tokens, num_tokens=tokens, num_topk=num_topk,
                                      ne=ne, hidden=hidden)  # fmt: skip
    # The size-hint limit: every rank sends max_tokens tokens, all to expert 0, whose block is
    # then full (world * max_tokens rows), on a workspace of exactly the hint.
    full = torch.zeros((16, 2), dtype=torch.int64)
    full[:, 1] = -1
    cases["limit_full_expert"] = dict(seed=10, max_tokens=16, num_tokens=16, num_topk=2, ne=2 * world, hidden=128,
                                      idx=full)  # fmt: skip
    cases["empty_rank"] = dict(seed=11, max_tokens=8, num_tokens=0 if rank == 0 else 5, num_topk=3, ne=2 * world,
                               hidden=128)  # fmt: skip
    # Only rank 0 marks the last rank inactive: no rank sends it tokens, it sends none.
    cases["inactive"] = dict(seed=12, max_tokens=8, num_tokens=6, num_topk=3, ne=2 * world, hidden=128,
                             active=[0 if (rank == 0 and r == last) else 1 for r in range(world)])  # fmt: skip
    # Active in dispatch, rank 0 inactive in combine: its returned rows add nothing, and the rows
    # of later ranks sit that many rows earlier in what came back (the kernels' dest_shift).
    cases["inactive_in_combine"] = dict(seed=13, max_tokens=8, num_tokens=6, num_topk=3, ne=2 * world, hidden=128,
                                        combine_active=[0 if r == 0 else 1 for r in range(world)])  # fmt: skip
    cases["fp8"] = dict(seed=14, max_tokens=8, num_tokens=7, num_topk=3, ne=2 * world, hidden=256, use_fp8=True)
    cases["zero_copy_out"] = dict(seed=15, max_tokens=8, num_tokens=5, num_topk=2, ne=world, hidden=128,
                                  zero_copy=True, use_out=True)  # fmt: skip
    results = {}
    for name, kw in cases.items():
        try:
            results[name] = scenario(group, rank, world, lib, **kw)
        except Exception:
            results[name] = {"error": traceback.format_exc()}
    with open(os.path.join(out, f"kernels.{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
