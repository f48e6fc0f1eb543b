"""mooncake.pg membership changes with real processes on loopback: a graceful leave and a
replacement, an extension into a seat never used, a killed rank detected and replaced, and an
in-place rejoin after our link-fault failpoint cut a rank off. Every joiner must end on the
members' epoch and active map."""

from __future__ import annotations

import multiprocessing as mp

import pytest

torch = pytest.importorskip("torch")

import pg_elastic_workers as w  # noqa: E402
from pg_harness import spawn  # noqa: E402

import mooncake.pg  # noqa: E402,F401  (registers the backend before the ranks fork)


def _events(k: int):
    ctx = mp.get_context("fork")
    return [ctx.Event() for _ in range(k)]


def test_graceful_leave_then_replacement():
    res = spawn(w.leave_and_replace, 3, *_events(2))
    assert res[1] == "left"
    assert res[0] == res[2], res  # the replacement got the member's epoch and active map
    assert res[0][1] == [1, 1]


def test_extension_then_killed_rank_replaced():
    res = spawn(w.extend_kill_replace, 4, *_events(2), dead=1)
    views = [res[r] for r in (0, 2, 3)]
    assert views[0] == views[1] == views[2], views
    assert views[0][1] == [1, 1, 1, 0]


def test_inplace_rejoin_after_link_fault():
    res = spawn(w.rejoin_after_link_fault, 2)
    assert res[0] == res[1], res


def test_paused_member_dropped_during_recovery():
    ctx = mp.get_context("fork")
    res = spawn(w.paused_member_dropped, 4, ctx.Value("i", 0), *_events(2))
    assert res[2] == "rejected"
    views = [res[r] for r in (0, 1, 3)]
    assert views[0] == views[1] == views[2], views
    assert views[0][1] == [1, 1, 0, 1]
