"""Rank bodies of the mooncake.pg membership tests (recovery, rejoin, extension, graceful leave),
run in forked processes. The groups meet on a TCP store hosted by rank 0's process, which stays
up for the whole scenario (ranks that join later connect to it, as with the reference's env://
rendezvous)."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist

TIMEOUT_US = 2_000_000  # how long a collective waits for a silent peer in these scenarios


def wait_until(pred, what: str, timeout_s: float = 120.0):
    end = time.monotonic() + timeout_s
    while not (v := pred()):
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return v


def init(rank: int, world: int, port: int, seats: int, extension: bool = False, **kw):
    from mooncake import pg

    pg.set_collective_timeout_us(TIMEOUT_US)
    pg.set_p2p_timeout_us(TIMEOUT_US)
    dist.init_process_group(
        "mooncake-cpu", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        pg_options=pg.MooncakeBackendOptions(seats, extension, **kw), timeout=timedelta(seconds=120))
    return pg


def total(ranks) -> int:
    """all_reduce of rank+1 over ranks."""
    return sum(r + 1 for r in ranks)


def check_all_reduce(rank: int, ranks):
    t = torch.tensor([rank + 1])
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    from mooncake import pg

    assert pg.get_local_success(w), pg.get_failed_ranks_hint(w)
    assert t.item() == total(ranks), (t.item(), ranks)


def ping_pong(rank: int, peer: int, first: bool):
    """One message each way between rank and peer (several slots long)."""
    out = torch.arange(3000, dtype=torch.int64) + 100 * rank
    got = torch.empty_like(out)
    if first:
        dist.send(out, peer)
        dist.recv(got, peer)
    else:
        dist.recv(got, peer)
        dist.send(out, peer)
    assert torch.equal(got, torch.arange(3000, dtype=torch.int64) + 100 * peer)


def leave_and_replace(rank: int, n: int, port: int, left, start):
    """Process 0 and 1 form a two-seat group; 1 leaves gracefully (deactivate_ranks of itself)
    and exits; process 2 takes seat 1 (is_extension) and 0 recovers it."""
    if rank < 2:
        pg = init(rank, 2, port, 2)
        world = dist.group.WORLD
        check_all_reduce(rank, [0, 1])
        epoch = pg.get_current_epoch(world)  # rank 1 cannot leave before our first message
        ping_pong(rank, 1 - rank, rank == 0)
        if rank == 1:
            resp = pg.deactivate_ranks(world, [1])
            assert resp.status == pg.ProposalStatus.Applied
            assert pg.get_active_ranks(world).tolist() == [0, 1]
            dist.destroy_process_group()
            left.set()
            return "left"
        # the leave mark takes seat 1 out of rank 0's view without any timeout
        t0 = time.monotonic()
        wait_until(lambda: pg.get_active_ranks(world).tolist() == [1, 0], "the leave mark")
        assert time.monotonic() - t0 < TIMEOUT_US / 1e6 + 30
        assert pg.get_current_epoch(world) > epoch
        check_all_reduce(rank, [0])  # alone, and at once
        assert left.wait(120)
        # a seat the group does not have: the caller's error, the group unchanged
        try:
            pg.activate_ranks(world, [5])
        except ValueError:
            pass
        else:
            raise AssertionError("seat 5 of 2 admitted")
        assert pg.activate_ranks(world, [0]).status == pg.ProposalStatus.Applied  # active: no-op
        start.set()
        wait_until(lambda: pg.get_peer_state(world, [1])[0], "the replacement")
        before = pg.get_current_epoch(world)
        resp = pg.recover_ranks(world, [1])
        assert resp.status == pg.ProposalStatus.Applied and resp.new_epoch > before, resp
        assert pg.get_active_ranks(world).tolist() == [1, 1]
        check_all_reduce(rank, [0, 1])
        ping_pong(rank, 1, True)
        return (pg.get_current_epoch(world), pg.get_active_ranks(world).tolist())
    assert start.wait(120)
    pg = init(1, 2, port, 2, extension=True)
    world = dist.group.WORLD
    pg.join_group(world)
    check_all_reduce(1, [0, 1])
    ping_pong(1, 0, False)
    return (pg.get_current_epoch(world), pg.get_active_ranks(world).tolist())


def extend_kill_replace(rank: int, n: int, port: int, extend, replace):
    """Seats 0 and 1 start a four-seat group; process 2 extends it into seat 2; seat 1 is then
    killed, detected and replaced by process 3: every stage checks all_reduce, all_gather and
    send/recv, and every member ends on one epoch and one active map."""
    from mooncake import pg

    if rank == 2:  # the extension rank
        assert extend.wait(120)
        pg = init(2, 3, port, 4, extension=True)
        world = dist.group.WORLD
        assert dist.get_world_size() == 3
        t = torch.tensor([7])
        dist.all_reduce(t)  # before join_group: alone
        assert t.item() == 7
        pg.join_group(world)
        check_all_reduce(2, [0, 1, 2])
    elif rank == 3:  # the replacement of seat 1
        assert replace.wait(120)
        pg = init(1, 3, port, 4, extension=True)
        world = dist.group.WORLD
        pg.join_group(world)
    else:
        pg = init(rank, 2, port, 4)
        world = dist.group.WORLD
        assert dist.get_world_size() == 2
        check_all_reduce(rank, [0, 1])
        if rank == 0:
            extend.set()
        wait_until(lambda: pg.get_peer_state(world, [2])[0], "the extension rank")
        assert pg.recover_ranks(world, [2]).status == pg.ProposalStatus.Applied
        assert dist.get_world_size() == 3
        check_all_reduce(rank, [0, 1, 2])
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    if rank in (0, 2):
        # seat 1 is gone: the next operation finds it within the timeout
        t = torch.tensor([rank + 1])
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        hint = pg.get_failed_ranks_hint(w).tolist()
        assert not pg.get_local_success(w) and hint[1] == 1, hint
        sync = pg.sync_after_failure(world).status
        assert sync == pg.SyncAfterFailureStatus.Reconciled, sync
        assert pg.get_active_ranks(world).tolist() == [1, 0, 1, 0], (hint, pg.get_active_ranks(world))
        check_all_reduce(rank, [0, 2])
        if rank == 0:
            replace.set()
        wait_until(lambda: pg.get_peer_state(world, [1])[0], "the replacement")
        assert pg.recover_ranks(world, [1]).status == pg.ProposalStatus.Applied
    # seats 0, 1 (the replacement) and 2
    me = dist.get_rank()
    check_all_reduce(me, [0, 1, 2])
    g = torch.zeros(3, dtype=torch.int32)
    dist.all_gather_into_tensor(g, torch.tensor([me * 10], dtype=torch.int32))
    assert g.tolist() == [0, 10, 20], g
    if me in (1, 2):  # the replacement and the extension rank talk directly
        ping_pong(me, 3 - me, me == 1)
    return (pg.get_current_epoch(world), pg.get_active_ranks(world).tolist())


def rejoin_after_link_fault(rank: int, n: int, port: int):
    """Two ranks; rank 1's link to rank 0 fails (our failpoint), both see the other fail, then
    the same rank 1 process rejoins in place (join_group / activate_ranks) and both data paths
    work again."""
    pg = init(rank, 2, port, 2)
    world = dist.group.WORLD
    b = pg._backend(world)
    check_all_reduce(rank, [0, 1])
    ping_pong(rank, 1 - rank, rank == 0)
    epoch = pg.get_current_epoch(world)
    if rank == 1:
        b._inject_link_fault(0, True)
    t = torch.tensor([rank + 1])
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert not pg.get_local_success(w)
    assert pg.get_failed_ranks_hint(w).tolist()[1 - rank] == 1
    assert pg.get_active_ranks(world).tolist()[1 - rank] == 0
    if rank == 1:
        b._inject_link_fault(0, False)
        pg.join_group(world)
    else:
        wait_until(lambda: pg.get_peer_state(world, [1])[0], "rank 1 to be reachable")
        resp = pg.activate_ranks(world, [1])
        assert resp.status == pg.ProposalStatus.Applied
        assert pg.get_current_epoch(world) > epoch
    assert pg.get_active_ranks(world).tolist() == [1, 1]
    check_all_reduce(rank, [0, 1])
    ping_pong(rank, 1 - rank, rank == 1)
    return pg.get_current_epoch(world)


WINDOW_US = 3_000_000  # how long a recovery waits for a silent member before dropping it


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def paused_member_dropped(rank: int, n: int, port: int, paused_pid, start, rejected):
    """Seats 0, 1 and 2 of a four-seat group; seat 2 is paused (SIGSTOP) before it could take
    part in a recovery; process 3 extends the group into seat 3. Seats 0 and 1 recover it: after
    the reconciliation window the silent seat 2 is dropped and the others go on as 0, 1, 3.
    Resumed, seat 2 finds its proposal rejected: the group moved on without it."""
    if rank == 3:
        assert start.wait(120)
        pg = init(3, 4, port, 4, extension=True)
        world = dist.group.WORLD
        pg.join_group(world)
        check_all_reduce(3, [0, 1, 3])
        return (pg.get_current_epoch(world), pg.get_active_ranks(world).tolist())
    pg = init(rank, 3, port, 4)
    pg.set_fault_reconciliation_window_us(WINDOW_US)
    world = dist.group.WORLD
    check_all_reduce(rank, [0, 1, 2])
    if rank == 2:
        paused_pid.value = os.getpid()
        os.kill(os.getpid(), signal.SIGSTOP)
        resp = pg.recover_ranks(world, [3])  # resumed after the others went on
        assert resp.status == pg.ProposalStatus.Rejected and "dropped" in resp.reject_reason, resp
        rejected.set()
        return "rejected"
    wait_until(lambda: paused_pid.value and _stopped(paused_pid.value), "seat 2 to be paused")
    if rank == 0:
        start.set()
    wait_until(lambda: pg.get_peer_state(world, [3])[0], "the extension rank")
    before = pg.get_current_epoch(world)
    t0 = time.monotonic()
    resp = pg.recover_ranks(world, [3])
    assert resp.status == pg.ProposalStatus.AppliedWithDroppedRanks, resp
    assert resp.dropped_ranks == [2] and resp.new_epoch > before, resp
    assert time.monotonic() - t0 < WINDOW_US / 1e6 + 60
    assert pg.get_active_ranks(world).tolist() == [1, 1, 0, 1]
    check_all_reduce(rank, [0, 1, 3])
    if rank == 0:  # the coordinator and the store live here: stay until seat 2 heard the news
        os.kill(paused_pid.value, signal.SIGCONT)
        assert rejected.wait(120)
    return (pg.get_current_epoch(world), pg.get_active_ranks(world).tolist())
