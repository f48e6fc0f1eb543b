"""Rank bodies of the mooncake.pg tests, run in spawned processes (one per rank).

Each rank computes every rank's inputs from seeds, so it checks its results against a reference
it computes itself, in the same rank order as the group reduces (so floats match bit for bit)."""

from __future__ import annotations

import os
import signal
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int8, torch.uint8,
          torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2]
DEAD_TIMEOUT_US = 3_000_000
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def init(rank: int, n: int, port: int, max_group_size: int | None = None, timeout_us: int | None = None):
    from mooncake import pg

    if timeout_us:
        pg.set_collective_timeout_us(timeout_us)
        pg.set_p2p_timeout_us(timeout_us)
    # A file store named by the parent's pid and the port the parent picked: no TCP server that
    # rank 0 takes down and brings back on destroy and re-init (other ranks would race it), and a
    # bounded wait instead of torch's 30 min default.
    path = f"/tmp/mc_pg_test_{os.getppid()}_{port}"
    dist.init_process_group("mooncake-cpu", init_method=f"file://{path}", rank=rank,
                            world_size=n, pg_options=pg.MooncakeBackendOptions(max_group_size or n),
                            timeout=timedelta(seconds=90))
    return pg


def run(body, rank, q, *args):
    """Runs body and reports ("ok", rank, value) or ("error", rank, traceback) on q."""
    try:
        q.put(("ok", rank, body(rank, *args)))
    except BaseException:
        q.put(("error", rank, traceback.format_exc()))
        raise


def inputs(r: int, dtype, shape, op: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + r)
    if op == "product":  # small values keep products in range
        v = torch.randint(1, 3, shape, generator=g)
    elif dtype.is_floating_point and dtype.itemsize > 1:
        v = torch.randn(shape, generator=g) * 4
    else:
        v = torch.randint(-8 if dtype not in (torch.uint8,) else 0, 8, shape, generator=g)
    return v.to(dtype)


def reference(xs, dtype, op: str) -> torch.Tensor:
    """The rank-ordered reduction with one rounding per step, as the group does it."""
    def f(t):
        if dtype == torch.float64:
            return t
        return t.float() if dtype.is_floating_point else t

    acc = xs[0].clone()
    for x in xs[1:]:
        a, b = f(acc), f(x)
        if op in ("sum", "avg"):
            c = a + b
        elif op == "product":
            c = a * b
        elif op == "min":
            c = torch.minimum(a, b)
        else:
            c = torch.maximum(a, b)
        acc = c.to(dtype)  # float32 arithmetic for the small floats, rounded back each step
    if op == "avg":
        acc = (f(acc) / len(xs)).to(dtype)
    return acc


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point:
        return torch.equal(a.view(torch.uint8) if a.itemsize == 1 else a.float().nan_to_num(),
                           b.view(torch.uint8) if b.itemsize == 1 else b.float().nan_to_num())
    return torch.equal(a, b)


def collectives(rank: int, n: int, pg):
    shape = (1237,)  # with the 8 KiB slots the tests set, several rounds per operation
    checked = 0
    for dtype in DTYPES:
        for name, op in OPS.items():
            if name == "avg" and not dtype.is_floating_point:
                continue
            xs = [inputs(r, dtype, shape, name) for r in range(n)]
            t = xs[rank].clone()
            dist.all_reduce(t, op=op)
            want = reference(xs, dtype, name)
            assert same(t, want), (dtype, name, t[:8], want[:8])
            checked += 1
        xs = [inputs(r, dtype, shape, "sum") for r in range(n)]
        # reduce_scatter: rank k gets the reduction of every rank's block k
        full = [torch.cat([x, x[: (n - shape[0] % n) % n]]) for x in xs]
        m = full[0].numel() // n
        out = torch.empty(m, dtype=dtype)
        dist.reduce_scatter_tensor(out, full[rank].clone(), op=dist.ReduceOp.MAX)
        assert same(out, reference([f[rank * m:(rank + 1) * m] for f in full], dtype, "max"))
        # all_gather (single buffer and list), broadcast, reduce, gather, scatter, all_to_all
        g = torch.empty(n * shape[0], dtype=dtype)
        dist.all_gather_into_tensor(g, xs[rank])
        assert same(g, torch.cat(xs))
        lst = [torch.empty(shape, dtype=dtype) for _ in range(n)]
        dist.all_gather(lst, xs[rank])
        assert all(same(lst[r], xs[r]) for r in range(n))
        b = xs[rank].clone()
        dist.broadcast(b, src=n - 1)
        assert same(b, xs[n - 1])
        rd = xs[rank].clone()
        dist.reduce(rd, dst=1, op=dist.ReduceOp.SUM)
        if rank == 1:
            assert same(rd, reference(xs, dtype, "sum"))
        gl = [torch.empty(shape, dtype=dtype) for _ in range(n)] if rank == 0 else None
        dist.gather(xs[rank], gl, dst=0)
        if rank == 0:
            assert all(same(gl[r], xs[r]) for r in range(n))
        sc = torch.empty(shape, dtype=dtype)
        dist.scatter(sc, [inputs(100 + r, dtype, shape, "sum") for r in range(n)] if rank == 2 else None, src=2)
        assert same(sc, inputs(100 + rank, dtype, shape, "sum"))
        a_in = torch.cat([inputs(10 * rank + r, dtype, shape, "sum") for r in range(n)])
        a_out = torch.empty_like(a_in)
        dist.all_to_all_single(a_out, a_in)
        assert same(a_out, torch.cat([inputs(10 * r + rank, dtype, shape, "sum") for r in range(n)]))
        checked += 8
    # uneven all_to_all splits and list all_to_all
    splits_in = [(rank + r) % 3 + 1 for r in range(n)]
    splits_out = [(r + rank) % 3 + 1 for r in range(n)]
    a_in = torch.cat([torch.full((s, 2), float(rank * 10 + r)) for r, s in enumerate(splits_in)])
    a_out = torch.empty(sum(splits_out), 2)
    dist.all_to_all_single(a_out, a_in, splits_out, splits_in)
    want = torch.cat([torch.full((s, 2), float(r * 10 + rank)) for r, s in enumerate(splits_out)])
    assert torch.equal(a_out, want), (a_out, want)
    outs = [torch.empty(2) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((2,), float(rank * 10 + r)) for r in range(n)])
    assert all(torch.equal(outs[r], torch.full((2,), float(r * 10 + rank))) for r in range(n))
    # non-contiguous tensors go through a contiguous copy
    nc = torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (rank + 1)
    dist.all_reduce(nc)
    assert torch.equal(nc, torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (n * (n + 1) // 2))
    # point to point: a ring, isend/irecv posted in either order, several slots long
    big = torch.arange(5000, dtype=torch.float64) + rank
    got = torch.empty_like(big)
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    works = [dist.isend(big, nxt), dist.irecv(got, prv)] if rank % 2 else [dist.irecv(got, prv), dist.isend(big, nxt)]
    for w in works:
        w.wait()
        assert pg.get_local_success(w)
    assert torch.equal(got, torch.arange(5000, dtype=torch.float64) + prv)
    # async work, its future and the hint
    t = torch.ones(3)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.get_future().wait() is None or True
    assert pg.get_local_success(w) and pg.get_failed_ranks_hint(w).tolist() == [0] * n
    assert torch.equal(t, torch.full((3,), float(n)))
    # bad arguments: clear errors, the group still works afterwards
    errors = []
    for i, bad in enumerate((
        lambda: dist.all_reduce(torch.ones(2, device="meta")),
        lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND),
        lambda: dist.all_gather_into_tensor(torch.empty(n + 1), torch.ones(1)),
        lambda: pg.get_peer_state(dist.group.WORLD, [n + 70]),
        lambda: pg.get_local_success("not a work"),
        lambda: pg.set_collective_timeout_us(-5),
        lambda: pg.deactivate_ranks(dist.group.WORLD, [n + 3]),
        lambda: pg.extend_group_size_to(dist.group.WORLD, n + 1),
    )):
        try:
            bad()
        except (TypeError, ValueError, RuntimeError) as e:
            errors.append(str(e))
        else:
            raise AssertionError(f"bad argument {i} accepted")
    assert "on the CPU" in errors[0] and "BAND" in errors[1] and "all_gather" in errors[2], errors
    assert pg.get_peer_state(dist.group.WORLD, list(range(n))) == [True] * n
    assert pg.get_active_ranks(dist.group.WORLD).tolist() == [1] * n
    assert pg.get_num_synced_ranks(dist.group.WORLD) == n
    assert pg.sync_after_failure(dist.group.WORLD).status == pg.SyncAfterFailureStatus.NoPending
    dist.barrier()
    return checked


def _model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _train(model, group, rank: int, steps: int, start: int = 0):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(start, start + steps):
        g = torch.Generator().manual_seed(100 * step + rank)
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return ddp


def zero_row_all_to_all(rank: int, group):
    """all_to_all_single on two ranks where a rank sends or receives no rows: a row is the
    shape's trailing dims, never input[0] (which a zero-row input does not have)."""
    other = 1 - rank
    # rank 0 sends all its 3 rows to rank 1 and none to itself; rank 1 sends nothing at all
    splits_in = [[0, 3], [0, 0]][rank]
    splits_out = [[0, 0], [3, 0]][rank]
    a_in = torch.full((sum(splits_in), 2, 5), float(rank + 1))
    a_out = torch.full((sum(splits_out), 2, 5), -1.0)
    dist.all_to_all_single(a_out, a_in, splits_out, splits_in, group=group)
    assert torch.equal(a_out, torch.full((sum(splits_out), 2, 5), float(other + 1))), a_out
    # both ranks with zero-row tensors: a collective that moves nothing still completes
    empty = torch.empty(0, 4)
    dist.all_to_all_single(torch.empty(0, 4), empty, [0, 0], [0, 0], group=group)
    # one row each way with a zero-row block to itself, and splits that do not add up
    a_out = torch.empty(1, 3, dtype=torch.int64)
    dist.all_to_all_single(a_out, torch.full((1, 3), rank + 7), [0, 1] if rank == 0 else [1, 0],
                           [0, 1] if rank == 0 else [1, 0], group=group)
    assert torch.equal(a_out, torch.full((1, 3), other + 7)), a_out
    try:
        dist.all_to_all_single(torch.empty(2, 2), torch.empty(2, 2), [1, 1], [2, 1], group=group)
    except ValueError as e:
        assert "split sizes" in str(e), e
    else:
        raise AssertionError("split sizes that do not add up were accepted")


def ddp_parity(rank: int, n: int, pg):
    """DDP on a two-rank mooncake-cpu subgroup and on a gloo one: the same parameters, bit for
    bit (two ranks: every sum has one order)."""
    ranks = [0, 1]
    mc_group = dist.new_group(ranks, backend="mooncake-cpu", pg_options=pg.MooncakeBackendOptions(2))
    gloo = dist.new_group(ranks, backend="gloo")
    if rank not in ranks:
        return None
    assert pg.get_active_ranks(mc_group).tolist() == [1, 1]
    zero_row_all_to_all(rank, mc_group)
    mc = _model()
    _train(mc, mc_group, rank, 6)
    ref = _model()
    _train(ref, gloo, rank, 6)
    for a, b in zip(mc.parameters(), ref.parameters()):
        assert torch.equal(a, b), (a - b).abs().max()
    return [p.detach().sum().item() for p in mc.parameters()]


def dead_rank(rank: int, n: int, pg):
    """Rank n-1 is killed after two training steps; the survivors see it in the next operation
    (within the timeout), agree in sync_after_failure, re-broadcast the parameters and go on
    training."""
    # a short timeout for this phase only: the others keep the default, so a rank that a busy
    # host deschedules for a while is not counted out there
    dist.group.WORLD.set_timeouts(collective_us=DEAD_TIMEOUT_US, p2p_us=DEAD_TIMEOUT_US)
    model = _model()
    ddp = _train(model, dist.group.WORLD, rank, 2)
    if rank == n - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    probe = torch.ones(1)
    w = dist.all_reduce(probe, async_op=True)
    w.wait()
    took = time.monotonic() - t0
    assert not pg.get_local_success(w)
    hint = pg.get_failed_ranks_hint(w).tolist()
    assert hint[n - 1] == 1 and not any(hint[: n - 1]), hint
    epoch = pg.get_current_epoch(dist.group.WORLD)
    resp = pg.sync_after_failure(dist.group.WORLD)
    assert resp.status == pg.SyncAfterFailureStatus.Reconciled, resp
    assert pg.get_active_ranks(dist.group.WORLD).tolist() == [1] * (n - 1) + [0]
    assert pg.get_num_synced_ranks(dist.group.WORLD) == n - 1
    assert pg.get_current_epoch(dist.group.WORLD) > epoch
    assert pg.get_peer_state(dist.group.WORLD, [n - 1]) == [False]
    for p in model.parameters():  # the survivors start again from rank 0's parameters
        dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(3):
        g = torch.Generator().manual_seed(7 + step + rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(torch.randn(8, 16, generator=g)), torch.zeros(8, 4)).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = torch.zeros(n * flat.numel())
    dist.all_gather_into_tensor(everyone, flat)
    parts = everyone.reshape(n, -1)
    for r in range(n - 1):
        assert torch.equal(parts[r], flat), "survivors' parameters differ"
    dist.barrier()
    return took


def all_phases(rank: int, n: int, port: int):
    """One group for every phase (a process start costs more than the phases): the collectives,
    DDP against gloo, then a rank killed; returns {phase: (value, seconds)}."""
    pg = init(rank, n, port)
    # destroy and init again on the same rendezvous: the new group must not meet the old one's
    # addresses (the store outlives the group)
    t = torch.tensor([rank + 1])
    dist.all_reduce(t)
    dist.destroy_process_group()
    pg = init(rank, n, port)
    dist.all_reduce(t)
    assert t.item() == n * sum(range(1, n + 1)), t
    out = {}
    for name, body in (("collectives", collectives), ("ddp", ddp_parity), ("dead_rank", dead_rank)):
        t = time.monotonic()
        out[name] = (body(rank, n, pg), time.monotonic() - t)
    dist.destroy_process_group()
    return out


def collectives_only(rank: int, n: int, port: int):
    pg = init(rank, n, port)
    v = collectives(rank, n, pg)
    dist.destroy_process_group()
    return v
