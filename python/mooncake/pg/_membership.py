"""Membership of a mooncake-cpu group through the PG's control plane (mooncake-pg/src/pg_coord.c,
reached over our framed RPC by the C calls ``mc_pg_ctrl_*``): group creation, recovery (a new
process takes a failed seat), in-place rejoin (the same process comes back) and extension (a seat
never used before).

The coordinator runs in the process of the group's rank 0 (one per process, for every group made
there; it lives as long as the process). The group's torch store only tells the ranks where it is:
``mooncake_pg/<inc>/ctrl`` holds {addr, group} for each incarnation of the group (a store that
outlives a destroyed group counts incarnations by joins), ``mooncake_pg/latest`` the newest one
(where an extension rank attaches).

The coordinator decides each membership change for all: the members' proposals (recover_ranks /
activate_ranks) and the joiners' requests (join_group) meet there; members that stay silent past
the reconciliation window (set_fault_reconciliation_window_us; default the membership timeout) are
dropped, so a paused or hung member cannot stall a recovery.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import threading
import uuid
from datetime import timedelta

from ._native import PgError, check

_ERR_ENDPOINT = -201

_coord_lock = threading.Lock()
_coord = ctypes.c_void_p()
_coord_addr = ""
_coord_pid = 0  # the process that started it: a forked child has none of its threads


def _stop(lib, handle, pid: int) -> None:
    if os.getpid() == pid:  # never from a forked child: the sockets are shared with the parent
        lib.mc_pg_coordinator_stop(handle)


def _coordinator(lib, host: str) -> str:
    """This process's coordinator ("host:port"), started on first use."""
    global _coord, _coord_addr, _coord_pid
    with _coord_lock:
        if _coord_pid != os.getpid():
            _coord = ctypes.c_void_p()
            check(lib.mc_pg_coordinator_start(host.encode(), 0, ctypes.byref(_coord)), "mc_pg_coordinator_start")
            buf = ctypes.create_string_buffer(300)
            check(lib.mc_pg_coordinator_address(_coord, buf, 300), "mc_pg_coordinator_address")
            _coord_addr, _coord_pid = buf.value.decode(), os.getpid()
            atexit.register(_stop, lib, _coord, _coord_pid)
        return _coord_addr


def _timeout_ms(b) -> int:
    return int(b._membership_timeout_s * 1000)


def _wait_key(b, store, key: str, what: str) -> bytes:
    try:
        store.wait([key], timedelta(seconds=b._membership_timeout_s))
    except Exception as e:  # torch raises its own store timeout types
        raise TimeoutError(f"mooncake-cpu: timed out waiting for {what}") from e
    return store.get(key)


def create(b, store, rank: int, size: int, extension: bool, host: str) -> None:
    """Enters the group at its coordinator: the first size ranks meet there (this incarnation's
    rank 0 publishes where), an extension rank attaches to the newest incarnation and runs alone
    until join_group."""
    if extension:
        inc = int(_wait_key(b, store, "mooncake_pg/latest", "a group to extend (its members never initialized)"))
    else:
        inc = (store.add("mooncake_pg/joins", 1) - 1) // size
        if rank == 0:
            ctrl = {"addr": _coordinator(b._lib, host), "group": uuid.uuid4().hex}
            store.set(f"mooncake_pg/{inc}/ctrl", json.dumps(ctrl))
    ctrl = json.loads(_wait_key(b, store, f"mooncake_pg/{inc}/ctrl", "the group's coordinator"))
    rc = b._lib.mc_pg_ctrl_register(
        b._handle(), ctrl["addr"].encode(), ctrl["group"].encode(), 1 if extension else 0, _timeout_ms(b)
    )
    if rc == _ERR_ENDPOINT:
        raise TimeoutError(f"mooncake-cpu: the group's {size} ranks did not all arrive in time")
    check(rc, "mc_pg_ctrl_register")
    if not extension:
        # where ranks that join later (is_extension) find this incarnation
        store.set("mooncake_pg/latest", str(inc))


def join(b) -> None:
    """This rank asks to (re)join its seat and waits for the members' decision."""
    rc = b._lib.mc_pg_ctrl_join(b._handle(), _timeout_ms(b))
    if rc == _ERR_ENDPOINT:
        raise TimeoutError(f"mooncake-cpu: the group did not admit rank {b.rank()} in time")
    check(rc, "mc_pg_ctrl_join")
    b._joined = True


class ProposalResult(ctypes.Structure):
    """struct mc_pg_proposal_result."""

    _fields_ = [
        ("status", ctypes.c_int),
        ("epoch", ctypes.c_uint64),
        ("dropped", ctypes.c_int32 * 64),
        ("reason", ctypes.c_char * 256),
    ]


def admit(b, ranks, window_ms: int):
    """The members' side of join: every active member calls it with the same ranks. Returns
    (status, epoch, dropped ranks, reason)."""
    arr = (ctypes.c_int32 * max(1, len(ranks)))(*ranks)
    res = ProposalResult()
    window = window_ms or _timeout_ms(b)
    rc = b._lib.mc_pg_ctrl_activate(b._handle(), arr, len(ranks), window, _timeout_ms(b), ctypes.byref(res))
    reason = res.reason.decode(errors="replace")
    if rc == _ERR_ENDPOINT:
        raise TimeoutError(f"mooncake-cpu: {reason or 'the ranks did not ask to join in time'}")
    if rc:
        raise PgError(f"mc_pg_ctrl_activate{': ' + reason if reason else ''}", rc)
    dropped = [i for i in range(b.max_group_size) if res.dropped[i]]
    return int(res.status), int(res.epoch), dropped, reason
