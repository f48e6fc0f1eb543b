"""Membership changes of a mooncake-cpu group, agreed through the group's store: recovery (a new
process takes a failed seat), in-place rejoin (the same process comes back) and extension (a seat
never used before all use the same exchange).

Keys, under the group's store prefix and incarnation (``mooncake_pg/<inc>/``):

- ``join_seq/<seat>``: a counter; a rank asking to (re)join a seat takes ticket = add(1);
- ``join/<seat>/<ticket>``: its request, {addr, round, syncs};
- ``recover/<tag>/<member>``: each member's state for one admission, {addr, round, syncs,
  epoch, active} (tag names the seats and tickets admitted);
- ``admit/<seat>/<ticket>``: the decision the lowest member writes for the joiner, {active,
  addrs, round, syncs, epoch}.

Every member computes the decision from the same states, so they apply the same view without a
coordinator; the joiner waits for it. Before a member publishes its state (and before a joiner
publishes its request) it resets the seats' point-to-point counters in its own region, so no
message of the new incarnation can be cleared by a late reset.
"""

from __future__ import annotations

import ctypes
import json
import time
from datetime import timedelta

from ._native import check

_POLL_S = 0.01


def _key(b, name: str) -> str:
    return f"mooncake_pg/{b._inc}/{name}"


def _deadline(b) -> float:
    return time.monotonic() + b._membership_timeout_s


def _wait_value(b, name: str, what: str) -> bytes:
    """The value of a key another rank sets, waiting up to the membership timeout."""
    key = _key(b, name)
    try:
        b._store.wait([key], timedelta(seconds=b._membership_timeout_s))
    except Exception as e:  # torch raises its own store timeout types
        raise TimeoutError(f"mooncake-cpu: timed out waiting for {what}") from e
    return b._store.get(key)


def _counters(b):
    r, s = ctypes.c_uint64(), ctypes.c_uint64()
    check(b._lib.mc_pg_counters(b._handle(), ctypes.byref(r), ctypes.byref(s)), "mc_pg_counters")
    return int(r.value), int(s.value)


def _reset(b, seats) -> None:
    seats = [s for s in seats if s != b.rank()]
    arr = (ctypes.c_int32 * max(1, len(seats)))(*seats)
    check(b._lib.mc_pg_reset_seats(b._handle(), arr, len(seats)), "mc_pg_reset_seats")


def _apply(b, active, round_: int, syncs: int, epoch: int) -> None:
    arr = (ctypes.c_int32 * b._seats)(*active)
    check(b._lib.mc_pg_admit(b._handle(), arr, b._seats, round_, syncs, epoch), "mc_pg_admit")


def set_peer(b, seat: int, addr: str) -> None:
    if b._addrs.get(seat) == addr:
        return
    check(b._lib.mc_pg_set_peer(b._handle(), seat, addr.encode()), "mc_pg_set_peer")
    b._addrs[seat] = addr


def newest_request(b, seat: int):
    """(ticket, request) of the newest join request for seat not admitted yet, or None."""
    ticket = int(b._store.add(_key(b, f"join_seq/{seat}"), 0))
    if ticket <= b._tickets.get(seat, 0):
        return None
    key = _key(b, f"join/{seat}/{ticket}")
    if not b._store.check([key]):  # the ticket is taken before the request is written
        return None
    return ticket, json.loads(b._store.get(key))


def join(b) -> None:
    """This rank asks to (re)join its seat and waits for the members' decision."""
    me = b.rank()
    _reset(b, range(b._seats))
    round_, syncs = _counters(b)
    ticket = int(b._store.add(_key(b, f"join_seq/{me}"), 1))
    req = {"addr": b._address, "round": round_, "syncs": syncs}
    b._store.set(_key(b, f"join/{me}/{ticket}"), json.dumps(req))
    d = json.loads(_wait_value(b, f"admit/{me}/{ticket}", f"the group to admit rank {me}"))
    for seat, addr in d["addrs"].items():
        if int(seat) != me:
            set_peer(b, int(seat), addr)
    _apply(b, d["active"], d["round"], d["syncs"], d["epoch"])
    b._joined = True


def admit(b, ranks) -> tuple[int, list]:
    """The members' side of join: every active member calls it with the same ranks; returns the
    new epoch and the ranks that were already active (nothing to do for them)."""
    me = b.rank()
    ranks = sorted(set(int(r) for r in ranks))
    active = [int(a) for a in b.active_ranks().tolist()]
    already = [r for r in ranks if active[r] and r != me]
    ranks = [r for r in ranks if not active[r]]
    if me in ranks:
        raise ValueError("mooncake-cpu: an inactive rank rejoins with join_group, not by admitting itself")
    if not ranks:
        return int(b._lib.mc_pg_epoch(b._handle())), already
    reqs = {}
    end = _deadline(b)
    for r in ranks:
        while (got := newest_request(b, r)) is None:
            if time.monotonic() > end:
                raise TimeoutError(f"mooncake-cpu: rank {r} did not ask to join (join_group) in time")
            time.sleep(_POLL_S)
        reqs[r] = got
    for r, (_, req) in reqs.items():
        set_peer(b, r, req["addr"])
    _reset(b, ranks)
    round_, syncs = _counters(b)
    epoch = int(b._lib.mc_pg_epoch(b._handle()))
    tag = ",".join(f"{r}.{reqs[r][0]}" for r in ranks)
    mine = {"addr": b._address, "round": round_, "syncs": syncs, "epoch": epoch, "active": active}
    b._store.set(_key(b, f"recover/{tag}/{me}"), json.dumps(mine))
    members = [i for i, a in enumerate(active) if a]
    states = {me: mine}
    for m in members:
        if m != me:
            states[m] = json.loads(_wait_value(b, f"recover/{tag}/{m}", f"member {m}'s state"))
    views = {tuple(s["active"]) for s in states.values()}
    if len(views) != 1:
        raise RuntimeError(
            f"mooncake-cpu: members disagree on the active ranks ({sorted(views)}); "
            "call sync_after_failure before admitting ranks"
        )
    new_active = list(active)
    for r in ranks:
        new_active[r] = 1
    decision = {
        "active": new_active,
        "addrs": {str(m): s["addr"] for m, s in states.items()} | {str(r): q["addr"] for r, (_, q) in reqs.items()},
        # flags only grow: everyone goes on above the highest round and sync anyone ran
        "round": max([s["round"] for s in states.values()] + [q["round"] for _, q in reqs.values()]),
        "syncs": max([s["syncs"] for s in states.values()] + [q["syncs"] for _, q in reqs.values()]),
        "epoch": max(s["epoch"] for s in states.values()) + 1,
    }
    if me == min(members):
        for r, (ticket, _) in reqs.items():
            b._store.set(_key(b, f"admit/{r}/{ticket}"), json.dumps(decision))
    _apply(b, new_active, decision["round"], decision["syncs"], decision["epoch"])
    for r, (ticket, _) in reqs.items():
        b._tickets[r] = ticket
    return decision["epoch"], already
