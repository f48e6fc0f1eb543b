"""One rank of the EP tests: ``python ep_workers.py RANK WORLD INIT_FILE OUT_DIR PASSES``.

Every rank runs every scenario in order on one gloo group, once per pass of PASSES (``pg``: rows
through the group's all_to_all_single; ``te``: through the Transfer Engine's registered buffers;
``te-fakedev``: the same, the buffers registered as fake GPU memory), saving its inputs and
outputs as ``OUT_DIR/<pass>/<scenario>.<rank>.npz`` and the errors it expected (or not) in
``.json``; test_ep_fallback.py checks them against numpy and the passes against each other. A
scenario that raises records its traceback and the rank goes on, so one failure does not hide
the rest. Each pass reseeds torch, so every pass sees the same inputs.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

from mooncake.engine import TransferEngine
from mooncake.ep import Buffer, ElasticBuffer, calculate_elastic_buffer_size, get_ep_buffer_size_hint

HIDDEN = 128
TOPK = 3
TRANSPORTS: set = set()  # every buffer's transport_name in this pass


def factor(expert: torch.Tensor) -> torch.Tensor:
    """The mock expert e multiplies its input by 1 + e / 8 (exact in bf16 for small e)."""
    return 1.0 + expert.float() / 8.0


def inputs(rank: int, world: int, num_tokens: int, num_experts: int, seed: int):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    x = torch.randn((num_tokens, HIDDEN), generator=g).to(torch.bfloat16)
    rows = [torch.randperm(num_experts, generator=g)[:TOPK] for _ in range(num_tokens)]
    idx = torch.stack(rows) if rows else torch.empty((0, TOPK), dtype=torch.int64)
    idx[torch.rand((num_tokens, TOPK), generator=g) < 0.15] = -1  # some masked selections
    w = torch.rand((num_tokens, TOPK), generator=g, dtype=torch.float32)
    return x, idx.contiguous(), w


def save(out: str, name: str, rank: int, **arrays) -> None:
    np.savez(os.path.join(out, f"{name}.{rank}.npz"), **{k: _np(v) for k, v in arrays.items()})


def _np(v):
    if isinstance(v, torch.Tensor):
        return (v.float() if v.dtype in (torch.bfloat16, torch.float8_e4m3fn) else v).numpy()
    return np.asarray(v)


def buffer_round(group, rank, world, out, name, num_tokens, max_tokens, num_experts, active=None, **kw):
    x, idx, w = inputs(rank, world, num_tokens, num_experts, seed=len(name))
    buf = Buffer(group, get_ep_buffer_size_hint(max_tokens, HIDDEN, world, num_experts))
    TRANSPORTS.add(buf.transport_name)
    active_t = None if active is None else torch.tensor(active, dtype=torch.int32)
    use_fp8 = kw.get("use_fp8", False)
    recv, count, handle, event, hook = buf.dispatch(x, idx, active_t, max_tokens, num_experts, -1, use_fp8=use_fp8)
    event.current_stream_wait()
    hook()
    if use_fp8:
        q, s = recv
        recv = (q.float().view(q.shape[0], q.shape[1], -1, 128) * s.unsqueeze(-1)).view(q.shape).to(torch.bfloat16)
    nl = num_experts // world
    expert_out = torch.stack([(recv[le].float() * factor(torch.tensor(rank * nl + le))).to(torch.bfloat16)
                              for le in range(nl)])  # fmt: skip
    src_info, layout = handle[0], handle[1]
    if kw.get("zero_copy"):
        nxt = buf.get_next_combine_buffer(handle)
        nxt.copy_(expert_out)
        combined, _, _ = buf.combine(nxt, idx, w, active_t, -1, handle, zero_copy=True)
    else:
        out_t = torch.empty((num_tokens, HIDDEN), dtype=torch.bfloat16)
        combined, _, _ = buf.combine(expert_out, idx, w, active_t, -1, handle, out=out_t)
        assert combined is out_t
    save(out, name, rank, x=x, idx=idx, w=w, recv=recv, count=count, src_info=src_info, layout=layout,
         combined=combined, active_after=active_t if active_t is not None else torch.ones(world, dtype=torch.int32))  # fmt: skip


def elastic_round(group, rank, world, out, name, num_tokens, max_tokens, num_experts, active=None, expand=False):
    x, idx, w = inputs(rank, world, num_tokens, num_experts, seed=len(name))
    buf = ElasticBuffer(group, num_max_tokens_per_rank=max_tokens, hidden=HIDDEN, num_topk=TOPK)
    TRANSPORTS.add(buf.transport_name)
    active_t = None if active is None else torch.tensor(active, dtype=torch.int32)
    nl = num_experts // world
    recv, ridx, rw, handle, event = buf.dispatch(
        x, topk_idx=idx, topk_weights=w, num_experts=num_experts, num_max_tokens_per_rank=max_tokens,
        expert_alignment=4 if expand else 1, do_expand=expand, do_cpu_sync=True, active_ranks=active_t,
    )  # fmt: skip
    event.current_stream_wait()
    actual = int(handle.psum_num_recv_tokens_per_scaleup_rank[-1])
    if expand:
        # One row per (token, local expert): the expert scales its rows; combine applies weights.
        expert_id = torch.full((recv.shape[0],), -1, dtype=torch.int64)
        ends = handle.psum_num_recv_tokens_per_expert.tolist()
        start = 0
        for le in range(nl):
            start = -(-start // 4) * 4
            expert_id[start : ends[le]] = rank * nl + le
            start = ends[le]
        scale = torch.where(expert_id >= 0, factor(expert_id), torch.zeros(expert_id.shape))
        y = (recv.float() * scale.unsqueeze(1)).to(torch.bfloat16)
        combined, _, _ = buf.combine(y, handle, topk_weights=rw, active_ranks=active_t)
    else:
        # One row per token: the expert applies each local slot's weight and factor.
        sel = ridx >= 0
        scale = (rw * torch.where(sel, factor(ridx + rank * nl), torch.zeros(ridx.shape)) * sel).sum(dim=1)
        y = (recv.float() * scale.unsqueeze(1)).to(torch.bfloat16)
        combined, _, _ = buf.combine(y, handle, active_ranks=active_t)
    # The cached handle: a second x on the same routing, identity experts, no weights.
    x2 = (x.float() * 2 + 1).to(torch.bfloat16)
    cached = None
    if not expand:
        recv2, ridx2, rw2, handle2, _ = buf.dispatch(x2, handle=handle, active_ranks=active_t)
        assert rw2 is None and recv2.shape[0] == max_tokens * world, recv2.shape
        assert torch.equal(ridx2[:actual], ridx[:actual])
        cached, _, _ = buf.combine(recv2, handle2, active_ranks=active_t)
    save(out, name, rank, x=x, idx=idx, w=w, recv=recv, ridx=ridx, rw=rw if rw is not None else torch.zeros(0),
         meta=handle.recv_src_metadata, psum_expert=handle.psum_num_recv_tokens_per_expert,
         counts=torch.tensor(handle.num_recv_tokens_per_expert_list), actual=torch.tensor(actual),
         combined=combined, x2=x2, cached=cached if cached is not None else torch.zeros(0),
         active_after=active_t if active_t is not None else torch.ones(world, dtype=torch.int32))  # fmt: skip
    buf.barrier()


def expect_error(results: dict, key: str, exc: type, fn) -> None:
    try:
        fn()
    except exc as e:
        results[key] = f"{type(e).__name__}: {e}"
        return
    except Exception as e:  # the wrong kind of error is a failure the test reports
        results[key] = f"WRONG {type(e).__name__}: {e}"
        return
    results[key] = "NO ERROR"


def limits(group, rank, world, out):
    """Shapes at the size-hint limits: a full expert, an exactly sized workspace, one byte less."""
    m, num_experts = 8, 2 * world
    x = torch.randn((m, HIDDEN)).to(torch.bfloat16)
    idx = torch.full((m, TOPK), -1, dtype=torch.int64)
    idx[:, 0] = 0  # every token of every rank to expert 0: world * m rows, the layout's capacity
    hint = get_ep_buffer_size_hint(m, HIDDEN, world, num_experts)
    buf = Buffer(group, hint)
    recv, count, handle, _, _ = buf.dispatch(x, idx, None, m, num_experts, -1, use_fp8=False)
    w = torch.ones((m, TOPK), dtype=torch.float32)
    combined, _, _ = buf.combine(recv, idx, w, None, -1, handle)
    res: dict = {}
    small = Buffer(group, hint - 1)
    expect_error(res, "buffer_one_byte_short", ValueError, lambda: small.dispatch(x, idx, None, m, num_experts, -1))
    over = torch.cat([x, x[:1]])
    over_idx = torch.cat([idx, idx[:1]])
    expect_error(res, "tokens_over_max", ValueError, lambda: buf.dispatch(over, over_idx, None, m, num_experts, -1))
    ehint = calculate_elastic_buffer_size(world, m, HIDDEN, TOPK, False, True, True)
    ebuf = ElasticBuffer(group, ehint, num_max_tokens_per_rank=m, hidden=HIDDEN, num_topk=TOPK)
    erecv, _, _, ehandle, _ = ebuf.dispatch(x, topk_idx=idx, num_experts=num_experts, num_max_tokens_per_rank=m)
    ecomb, _, _ = ebuf.combine(erecv, ehandle)
    eshort = ElasticBuffer(group, ehint - 1, num_max_tokens_per_rank=m, hidden=HIDDEN, num_topk=TOPK)
    expect_error(res, "elastic_one_byte_short", ValueError,
                 lambda: eshort.dispatch(x, topk_idx=idx, num_experts=num_experts, num_max_tokens_per_rank=m))  # fmt: skip
    save(out, "limits", rank, x=x, recv=recv, count=count, combined=combined, erecv=erecv, ecombined=ecomb,
         hint=torch.tensor(hint), ehint=torch.tensor(ehint))  # fmt: skip
    with open(os.path.join(out, f"limits.{rank}.json"), "w") as f:
        json.dump(res, f)


def bad_arguments(group, rank, world, out):
    """Wrong arguments fail locally with a clear error, before any collective."""
    ne = 2 * world
    x = torch.randn((4, HIDDEN)).to(torch.bfloat16)
    idx = torch.full((4, TOPK), -1, dtype=torch.int64)
    idx[:, 0] = (2 * torch.arange(4)) % ne  # a token for each of the first 4 ranks: each receives one
    buf = Buffer(group)
    eb = ElasticBuffer(group, num_max_tokens_per_rank=8, hidden=HIDDEN, num_topk=TOPK)
    res: dict = {}
    cases = {
        "x_float32": (TypeError, lambda: buf.dispatch(x.float(), idx, None, 8, ne, -1)),
        "x_1d": (ValueError, lambda: buf.dispatch(x[0], idx, None, 8, ne, -1)),
        "hidden_not_128": (ValueError, lambda: buf.dispatch(x[:, :64].contiguous(), idx, None, 8, ne, -1)),
        "topk_int32": (TypeError, lambda: buf.dispatch(x, idx.int(), None, 8, ne, -1)),
        "topk_rows": (ValueError, lambda: buf.dispatch(x, idx[:3].contiguous(), None, 8, ne, -1)),
        "expert_out_of_range": (ValueError, lambda: buf.dispatch(x, idx + ne, None, 8, ne, -1)),
        "expert_below_minus_one": (ValueError, lambda: buf.dispatch(x, idx - 2, None, 8, ne, -1)),
        "experts_not_divisible": (ValueError, lambda: buf.dispatch(x, idx, None, 8, 2 * world + 1, -1)),
        "active_ranks_length": (
            ValueError, lambda: buf.dispatch(x, idx, torch.ones(world + 1, dtype=torch.int32), 8, ne, -1)),
        "active_ranks_dtype": (TypeError, lambda: buf.dispatch(x, idx, torch.ones(world), 8, ne, -1)),
        "max_tokens_zero": (ValueError, lambda: buf.dispatch(x, idx, None, 0, ne, -1)),
        "max_tokens_str": (TypeError, lambda: buf.dispatch(x, idx, None, "8", ne, -1)),
        "combine_foreign_handle": (TypeError, lambda: buf.combine(x, idx, idx.float(), None, -1, (1, 2, 3, 4, 5))),
        "zero_copy_without_buffer": (ValueError, lambda: _zero_copy_without_buffer(buf, x, idx, ne)),
        "buffer_bytes_negative": (ValueError, lambda: Buffer(group, -1)),
        "group_none": (TypeError, lambda: Buffer(None)),
        "hint_negative": (ValueError, lambda: get_ep_buffer_size_hint(-1, HIDDEN, world, ne)),
        "hint_zero_ranks": (ValueError, lambda: get_ep_buffer_size_hint(8, HIDDEN, 0, ne)),
        "elastic_handle_and_topk": (ValueError, lambda: eb.dispatch(x, topk_idx=idx, handle=_ehandle(eb, x, idx, ne))),
        "elastic_no_topk": (ValueError, lambda: eb.dispatch(x, num_experts=ne)),
        "elastic_weights_shape": (
            ValueError, lambda: eb.dispatch(x, topk_idx=idx, topk_weights=torch.ones(4, 1), num_experts=ne)),
        "elastic_single_reduction": (NotImplementedError, lambda: ElasticBuffer(group, allow_multiple_reduction=False)),
        "elastic_combine_too_few_rows": (ValueError, lambda: _combine_short(eb, x, idx, ne)),
        "elastic_destroyed": (RuntimeError, lambda: _destroyed(group)),
        "engine_not_an_engine": (TypeError, lambda: Buffer(group, engine="127.0.0.1:1234")),
        "engine_not_started": (ValueError, lambda: ElasticBuffer(group, engine=TransferEngine())),
    }  # fmt: skip
    for key, (exc, fn) in cases.items():
        expect_error(res, key, exc, fn)
    with open(os.path.join(out, f"bad_arguments.{rank}.json"), "w") as f:
        json.dump(res, f)


def _zero_copy_without_buffer(buf, x, idx, ne):
    w = torch.ones(idx.shape, dtype=torch.float32)
    _, _, handle, _, _ = buf.dispatch(x, idx, None, 8, ne, -1, use_fp8=False)
    nl = ne // buf.group_size
    y = torch.zeros((nl, 8 * buf.group_size, HIDDEN), dtype=torch.bfloat16)
    try:
        buf.combine(y, idx, w, None, -1, handle, zero_copy=True)
    finally:
        buf.combine(y, idx, w, None, -1, handle)  # keep the ranks in step: the others combine once


def _ehandle(eb, x, idx, ne):
    return eb.dispatch(x, topk_idx=idx, num_experts=ne)[3]


def _combine_short(eb, x, idx, ne):
    recv, _, _, handle, _ = eb.dispatch(x, topk_idx=idx, num_experts=ne)
    try:
        eb.combine(recv[: max(0, handle.num_recv_tokens - 1)].contiguous(), handle)
    finally:
        eb.combine(recv, handle)


def _destroyed(group):
    b = ElasticBuffer(group, num_max_tokens_per_rank=8, hidden=HIDDEN, num_topk=TOPK)
    b.destroy()
    b.barrier()


def mismatch(group, rank, world, out):
    """Ranks that disagree on a shape all fail with the same message, and stay in step."""
    x = torch.randn((4, HIDDEN)).to(torch.bfloat16)
    idx = torch.zeros((4, TOPK), dtype=torch.int64)
    res: dict = {}
    buf = Buffer(group)
    expect_error(res, "num_experts", ValueError, lambda: buf.dispatch(x, idx, None, 8, 2 * world * (1 + rank % 2), -1))
    # The group still works afterwards.
    recv, count, handle, _, _ = buf.dispatch(x, idx, None, 8, 2 * world, -1, use_fp8=False)
    res["after"] = int(count.sum())
    # A re-connect (membership changed) sets the transport up anew; calls go on as before.
    buf.update_ep_member()
    recv, count, handle, _, _ = buf.dispatch(x, idx, None, 8, 2 * world, -1, use_fp8=False)
    w = torch.zeros((4, TOPK))
    w[:, 0] = 1.0  # expert 0 listed three times: its weights add up, to 1 here
    combined, _, _ = buf.combine(recv, idx, w, None, -1, handle)
    res["after_update"] = [int(count.sum()), bool(torch.equal(combined, x)), buf.transport_name]
    with open(os.path.join(out, f"mismatch.{rank}.json"), "w") as f:
        json.dump(res, f)


def engine_missing(group, rank, world, out):
    """One rank cannot start a Transfer Engine (its host cannot be bound): with the automatic
    choice every rank moves rows through the group, and right; with MC_EP_TRANSPORT=te every rank
    fails with the same clear error. A bad MC_EP_TRANSPORT is a ValueError."""
    res: dict = {}
    saved = {k: os.environ.get(k) for k in ("MC_EP_TE_HOST", "MC_EP_TRANSPORT")}
    try:
        if rank == world - 1:
            os.environ["MC_EP_TE_HOST"] = "192.0.2.1:0"  # TEST-NET: no interface has it
        os.environ["MC_EP_TRANSPORT"] = "auto"
        buf = Buffer(group)
        res["auto_transport"] = buf.transport_name
        x = torch.randn((4, HIDDEN)).to(torch.bfloat16)
        idx = torch.full((4, TOPK), -1, dtype=torch.int64)
        idx[:, 0] = torch.arange(4) % (2 * world)
        recv, count, handle, _, _ = buf.dispatch(x, idx, None, 8, 2 * world, -1, use_fp8=False)
        combined, _, _ = buf.combine(recv, idx, torch.ones((4, TOPK)), None, -1, handle)
        res["auto_roundtrip_exact"] = bool(torch.equal(combined, x))
        os.environ["MC_EP_TRANSPORT"] = "te"
        expect_error(res, "te_forced", RuntimeError, lambda: Buffer(group))
        os.environ.pop("MC_EP_TE_HOST", None)
        # An engine the caller started and gave the buffer: rows through it.
        engine = TransferEngine()
        assert engine.initialize("127.0.0.1:0", "P2PHANDSHAKE", "tcp", "") == 0
        given = ElasticBuffer(group, num_max_tokens_per_rank=8, hidden=HIDDEN, num_topk=TOPK, engine=engine)
        res["given_transport"] = given.transport_name
        before = engine.get_transport_stats()["tcp"][1]
        recv, _, _, h, _ = given.dispatch(x, topk_idx=idx, num_experts=2 * world)
        combined, _, _ = given.combine(recv, h)
        res["given_roundtrip_exact"] = bool(torch.equal(combined, x))
        res["given_engine_moved_bytes"] = engine.get_transport_stats()["tcp"][1] > before
        given.destroy()
        os.environ["MC_EP_TRANSPORT"] = "bogus"
        expect_error(res, "bad_mode", ValueError, lambda: Buffer(group))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with open(os.path.join(out, f"engine_missing.{rank}.json"), "w") as f:
        json.dump(res, f)


MARKER = b"MC-FAKE-DEV-FAIL"  # the fake device backend fails a copy whose source starts with it


def te_copy_failure(group, rank, world, out):
    """A device copy fails while rank 0 writes its rows to rank 1: rank 0 gets the engine's
    failure naming rank 1, rank 1 a timeout naming rank 0, the others their rows; the next
    dispatch and combine work on every rank."""
    res: dict = {}
    ne = 2 * world
    buf = Buffer(group)
    x = torch.randn((2, HIDDEN)).to(torch.bfloat16)
    idx = torch.full((2, TOPK), -1, dtype=torch.int64)
    idx[:, 0] = 2 * rank  # to this rank's own expert...
    if rank == 0:
        idx[0, 0] = 2  # ...but rank 0's first token goes to rank 1, and starts with the marker
        x[0, :8] = torch.frombuffer(bytearray(MARKER), dtype=torch.bfloat16)
    # rank 1 waits 2 s for rows that cannot come (the failure is certain, not a race)
    expect_error(res, "failed", RuntimeError, lambda: buf.dispatch(x, idx, None, 8, ne, 2_000_000, use_fp8=False))
    res["after_exact"] = _round_trip_exact(buf, *_to_next_rank(rank, world, 2), world)
    with open(os.path.join(out, f"te_copy_failure.{rank}.json"), "w") as f:
        json.dump(res, f)


def _to_next_rank(rank, world, num_tokens):
    """Tokens that each go to one expert of the next rank (2 experts a rank)."""
    x = torch.randn((num_tokens, HIDDEN)).to(torch.bfloat16)
    idx = torch.full((num_tokens, TOPK), -1, dtype=torch.int64)
    idx[:, 0] = 2 * ((rank + 1) % world) + torch.arange(num_tokens) % 2
    return x, idx


def _round_trip_exact(buf, x, idx, world):
    """Dispatch and combine with identity experts and weight 1: whether x came back exactly."""
    recv, _, handle, _, _ = buf.dispatch(x, idx, None, 8, 2 * world, -1, use_fp8=False)
    combined, _, _ = buf.combine(recv, idx, torch.ones(idx.shape), None, -1, handle)
    return bool(torch.equal(combined, x))


def te_region_failure(group, rank, world, out):
    """The last rank cannot register its regions (a fake GPU that does not exist): the call fails
    on every rank, naming that rank; once it can again, the next call works everywhere."""
    res: dict = {}
    ne = 2 * world
    buf = Buffer(group)
    x, idx = _to_next_rank(rank, world, 2)
    if rank == world - 1:
        os.environ["MC_EP_TE_LOCATION"] = "cuda:7"  # MC_DEVMEM_FAKE_DEVICES is 2
    try:
        expect_error(res, "failed", RuntimeError, lambda: buf.dispatch(x, idx, None, 8, ne, -1, use_fp8=False))
    finally:
        os.environ["MC_EP_TE_LOCATION"] = "cuda:0"
    res["after_exact"] = _round_trip_exact(buf, x, idx, world)
    with open(os.path.join(out, f"te_region_failure.{rank}.json"), "w") as f:
        json.dump(res, f)


def te_shm(group, rank, world, out):
    """The engine's automatic protocol between processes of one host: the rows go through shm
    (its byte count grows, tcp's does not) and come back exact."""
    from mooncake.ep import _te

    res: dict = {}
    saved = os.environ.get("MC_EP_TE_PROTOCOL")
    os.environ["MC_EP_TE_PROTOCOL"] = "auto"
    try:
        buf = Buffer(group)
    finally:
        os.environ["MC_EP_TE_PROTOCOL"] = saved or ""
    engine = buf._exchange.transport.engine
    assert engine is _te._shared_engine.__globals__["_shared"][("127.0.0.1", "auto", os.environ.get("MC_DEVMEM", ""))]
    before = engine.get_transport_stats()
    res["exact"] = _round_trip_exact(buf, *_to_next_rank(rank, world, 4), world)
    after = engine.get_transport_stats()
    res["name"] = buf.transport_name
    res["shm_bytes"] = after["shm"][1] - before["shm"][1]
    res["tcp_bytes"] = after["tcp"][1] - before["tcp"][1]
    with open(os.path.join(out, f"te_shm.{rank}.json"), "w") as f:
        json.dump(res, f)


def scenarios_for(group, rank, world, out, kind):
    ne = 2 * world
    last = world - 1
    scenarios = [
        ("buffer", lambda: buffer_round(group, rank, world, out, "buffer", 5 + 2 * rank, 12, ne)),
        ("buffer_fp8", lambda: buffer_round(group, rank, world, out, "buffer_fp8", 6, 8, ne, use_fp8=True)),
        ("buffer_zero_copy", lambda: buffer_round(group, rank, world, out, "buffer_zero_copy", 7, 8, ne, zero_copy=True)),
        # Only rank 0 marks the last rank inactive: every rank must still leave it out.
        ("buffer_inactive", lambda: buffer_round(group, rank, world, out, "buffer_inactive", 6, 8, ne,
                                                 active=[0 if (rank == 0 and r == last) else 1 for r in range(world)])),
        ("buffer_empty", lambda: buffer_round(group, rank, world, out, "buffer_empty", 0 if rank == 0 else 3, 8, ne)),
        ("elastic", lambda: elastic_round(group, rank, world, out, "elastic", 5 + rank, 8, ne)),
        ("elastic_expand", lambda: elastic_round(group, rank, world, out, "elastic_expand", 6, 8, ne, expand=True)),
        ("elastic_inactive", lambda: elastic_round(group, rank, world, out, "elastic_inactive", 6, 8, ne,
                                                   active=[0 if r == last else 1 for r in range(world)])),
        ("limits", lambda: limits(group, rank, world, out)),
        ("bad_arguments", lambda: bad_arguments(group, rank, world, out)),
        ("mismatch", lambda: mismatch(group, rank, world, out)),
    ]  # fmt: skip
    if kind == "te":
        scenarios.append(("engine_missing", lambda: engine_missing(group, rank, world, out)))
        scenarios.append(("te_shm", lambda: te_shm(group, rank, world, out)))
    if kind == "te-mooncake-cpu":  # our PG: the scenarios whose ranks send no rows, and the limits
        keep = {"buffer", "buffer_inactive", "buffer_empty", "elastic", "elastic_inactive", "limits"}
        scenarios = [s for s in scenarios if s[0] in keep]
    if kind == "te-fakedev":  # the engine path's own part again, through fake GPU memory
        keep = {"buffer", "buffer_inactive", "elastic", "elastic_expand", "limits"}
        scenarios = [s for s in scenarios if s[0] in keep]
        scenarios.append(("te_copy_failure", lambda: te_copy_failure(group, rank, world, out)))
        scenarios.append(("te_region_failure", lambda: te_region_failure(group, rank, world, out)))
    return scenarios


def main() -> None:
    rank, world, init_file, out_root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    passes = sys.argv[5].split(",") if len(sys.argv) > 5 else ["pg"]
    backend = os.environ.get("EP_TEST_BACKEND", "gloo")  # mooncake-cpu: our PG backend
    kw = {}
    pg_engine = None
    if backend == "mooncake-cpu":
        from mooncake import pg

        kw["pg_options"] = pg.MooncakeBackendOptions(world)
        # The group runs on an engine we give it; the EP buffers must take that same engine.
        pg_engine = TransferEngine()
        assert pg_engine.initialize("127.0.0.1:0", "P2PHANDSHAKE", "tcp", "") == 0
        pg.set_transfer_engine(pg_engine)
    dist.init_process_group(
        backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=60), **kw,
    )  # fmt: skip
    group = dist.group.WORLD
    if pg_engine is not None:
        probe = Buffer(group)
        with open(os.path.join(out_root, f"pg_engine.{rank}.json"), "w") as f:
            json.dump({"same_engine": probe._exchange.transport.engine is pg_engine, "name": probe.transport_name}, f)
    failed = False
    for kind in passes:
        os.environ["MC_EP_TRANSPORT"] = "pg" if kind == "pg" else "te"
        if kind == "te-fakedev":  # a new engine with the fake device table; regions as its GPU memory
            os.environ.update(MC_DEVMEM="fake", MC_EP_TE_LOCATION="cuda:0")
        out = os.path.join(out_root, kind)
        os.makedirs(out, exist_ok=True)
        torch.manual_seed(1234 + rank)
        TRANSPORTS.clear()
        started = time.monotonic()
        for name, fn in scenarios_for(group, rank, world, out, kind):
            try:
                fn()
            except Exception:
                failed = True
                with open(os.path.join(out, f"{name}.{rank}.error"), "w") as f:
                    f.write(traceback.format_exc())
        with open(os.path.join(out, f"transport.{rank}.json"), "w") as f:
            json.dump(sorted(TRANSPORTS), f)
        print(f"rank {rank}: pass {kind} took {time.monotonic() - started:.1f} s", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
