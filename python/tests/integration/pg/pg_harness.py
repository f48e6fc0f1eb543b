"""Runs a rank body on n forked processes (the mooncake.pg tests' harness)."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket

import pytest

import pg_workers


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(body, n: int, *args, dead: int | None = None, deadline: float = 240.0):
    """Runs body(rank, n, port, *args) on n forked ranks; returns {rank: value}. A rank that
    raises fails the test with its traceback; dead is the rank that is meant to die. Forked
    (the parent imported torch and started no thread), so no rank pays torch's import again."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    port_ = port()
    old = os.environ.get("MC_PG_SLOT_BYTES")
    os.environ["MC_PG_SLOT_BYTES"] = "8192"
    try:
        procs = [ctx.Process(target=pg_workers.run, args=(body, r, q, n, port_, *args)) for r in range(n)]
        for p in procs:
            p.start()
    finally:
        if old is None:
            os.environ.pop("MC_PG_SLOT_BYTES")
        else:
            os.environ["MC_PG_SLOT_BYTES"] = old
    results, errors = {}, []
    want = n - (dead is not None)
    try:
        while len(results) + len(errors) < want:
            try:
                status, rank, value = q.get(timeout=deadline)
            except queue.Empty:
                pytest.fail(f"ranks did not finish in {deadline} s (got {sorted(results)})")
            if status == "ok":
                results[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
                p.join()
    try:
        os.unlink(f"/tmp/mc_pg_test_{os.getpid()}_{port_}")
    except FileNotFoundError:
        pass
    assert not errors, "\n".join(errors)
    for r, p in enumerate(procs):
        if r != dead:
            assert p.exitcode == 0, (r, p.exitcode)
    return results
