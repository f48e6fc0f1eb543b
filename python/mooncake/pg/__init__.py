"""``mooncake.pg``: collectives and P2P on the Transfer Engine as a torch process group.

Importing this module registers the torch backend ``mooncake-cpu`` (CPU tensors; the reference's
``mooncake`` GPU backend is not built: device memory is not supported yet). The group runs on
the C core (libmooncake_pg.so, mooncake/pg.h) through ctypes, so it needs no build against torch
and works with every torch version from 2.4 on.

The reference's Python names, with the same arguments: ``MooncakeBackendOptions``,
``set_transfer_engine``, ``set_host_ip``, ``set_device_filter``, ``set_collective_timeout_us``,
``set_p2p_timeout_us``, ``set_fault_reconciliation_window_us``, ``get_active_ranks``,
``get_num_synced_ranks``, ``get_peer_state``, ``deactivate_ranks``, ``get_failed_ranks_hint``,
``get_local_success``, ``get_current_epoch``, ``sync_after_failure``, ``ProposalStatus``,
``SyncAfterFailureStatus``, and the membership changes: ``recover_ranks`` (members admit a
replacement or an extension rank), ``activate_ranks`` (members take a live rank back in place),
``join_group`` (the rank being admitted), ``deactivate_ranks`` (others, or this rank itself: a
graceful leave), ``extend_group_size_to``.
"""

from __future__ import annotations

import ctypes
import enum
import os
import threading
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from . import _native
from . import _membership
from ._backend import MooncakeProcessGroup, MooncakeWork
from ._native import PgError, check

__all__ = [
    "MooncakeBackendOptions",
    "MooncakeProcessGroup",
    "MooncakeWork",
    "PgError",
    "ProposalStatus",
    "ViewUpdateStatus",
    "SyncAfterFailureStatus",
    "SyncAfterFailureResponse",
    "ProposeViewUpdateResponse",
    "set_transfer_engine",
    "set_host_ip",
    "set_device_filter",
    "set_collective_timeout_us",
    "set_p2p_timeout_us",
    "set_fault_reconciliation_window_us",
    "get_active_ranks",
    "get_num_synced_ranks",
    "extend_group_size_to",
    "get_peer_state",
    "recover_ranks",
    "activate_ranks",
    "deactivate_ranks",
    "join_group",
    "get_failed_ranks_hint",
    "get_local_success",
    "get_current_epoch",
    "sync_after_failure",
]


class ProposalStatus(enum.IntEnum):
    Rejected = 0
    Applied = 1
    AppliedWithDroppedRanks = 2


ViewUpdateStatus = ProposalStatus  # the reference's older name


class SyncAfterFailureStatus(enum.IntEnum):
    Reconciled = 0
    NoPending = 1
    Rejected = 2


@dataclass(frozen=True)
class SyncAfterFailureResponse:
    status: SyncAfterFailureStatus
    reject_reason: str = ""


@dataclass(frozen=True)
class ProposeViewUpdateResponse:
    status: ProposalStatus
    new_epoch: int = 0
    dropped_ranks: list = field(default_factory=list)
    reject_reason: str = ""


class MooncakeBackendOptions:
    """The group's options (``pg_options`` of ``init_process_group``), as the reference's:
    ``MooncakeBackendOptions(max_group_size, is_extension=False, auto_deactivate_on_failure=True,
    auto_sync_on_failure=True)``; the reference's older ``(active_ranks_tensor, ...)`` form is
    accepted too."""

    def __init__(
        self,
        max_group_size=None,
        is_extension: bool = False,
        auto_deactivate_on_failure: bool = True,
        auto_sync_on_failure: bool = True,
        *,
        active_ranks=None,
    ):
        if isinstance(max_group_size, torch.Tensor):
            active_ranks, max_group_size = max_group_size, None
            if isinstance(is_extension, int) and not isinstance(is_extension, bool):
                raise TypeError("is_extension must be a bool")
        if active_ranks is not None:
            active_ranks = torch.as_tensor(active_ranks, dtype=torch.int32)
            if max_group_size is None:
                max_group_size = int(active_ranks.numel())
        if max_group_size is not None:
            if isinstance(max_group_size, bool) or not isinstance(max_group_size, int):
                raise TypeError(f"max_group_size must be an int, got {type(max_group_size).__name__}")
            if not 1 <= max_group_size <= _native.MAX_RANKS:
                raise ValueError(f"max_group_size must be in 1..{_native.MAX_RANKS}, got {max_group_size}")
        self.max_group_size = max_group_size
        self.is_extension = bool(is_extension)
        self.auto_deactivate_on_failure = bool(auto_deactivate_on_failure)
        self.auto_sync_on_failure = bool(auto_sync_on_failure)
        self.active_ranks = active_ranks

    def __repr__(self) -> str:
        return (
            f"MooncakeBackendOptions(max_group_size={self.max_group_size}, "
            f"is_extension={self.is_extension}, "
            f"auto_deactivate_on_failure={self.auto_deactivate_on_failure}, "
            f"auto_sync_on_failure={self.auto_sync_on_failure})"
        )


# Process-wide settings the next groups pick up (the reference's context setters).
_config_lock = threading.Lock()
_config: dict = {
    "engine": None,
    "engine_obj": None,
    "host_ip": None,
    "device_filter": None,
    "collective_timeout_ms": 0,
    "p2p_timeout_ms": 0,
    "reconciliation_ms": 0,
}


def _us_to_ms(us, what: str) -> int:
    if isinstance(us, bool) or not isinstance(us, int):
        raise TypeError(f"{what} takes an int number of microseconds")
    if us <= 0:
        raise ValueError(f"{what} must be positive, got {us}")
    return max(1, (us + 999) // 1000)


def set_host_ip(host: str) -> None:
    """The address peers reach this process's engine at (default 127.0.0.1)."""
    if not isinstance(host, str) or not host:
        raise ValueError("set_host_ip takes a non-empty host string")
    with _config_lock:
        _config["host_ip"] = host


def set_device_filter(filters) -> None:
    """Accepted for the reference's RDMA NIC selection; TCP and shm use no device."""
    if isinstance(filters, str) or not all(isinstance(f, str) for f in filters):
        raise TypeError("set_device_filter takes a list of device names")
    with _config_lock:
        _config["device_filter"] = list(filters)


def set_collective_timeout_us(us: int) -> None:
    """How long a collective waits for a peer before counting it failed."""
    ms = _us_to_ms(us, "set_collective_timeout_us")
    with _config_lock:
        _config["collective_timeout_ms"] = ms


def set_p2p_timeout_us(us: int) -> None:
    """How long a send waits for credit and a recv for data."""
    ms = _us_to_ms(us, "set_p2p_timeout_us")
    with _config_lock:
        _config["p2p_timeout_ms"] = ms


def set_fault_reconciliation_window_us(us: int) -> None:
    """How long a membership change (recover_ranks, activate_ranks) waits for the remaining
    members after the first one proposed: those still silent then are dropped (default: the
    membership timeout, twice the collective timeout and at least 60 s)."""
    ms = _us_to_ms(us, "set_fault_reconciliation_window_us")
    with _config_lock:
        _config["reconciliation_ms"] = ms


def set_transfer_engine(engine) -> None:
    """Use this initialized ``mooncake.engine.TransferEngine`` for the groups created next
    (``None``: each group starts its own). It must outlive those groups."""
    if engine is None:
        with _config_lock:
            _config["engine"], _config["engine_obj"] = None, None
        return
    ptr = engine.get_engine_ptr()
    if not ptr:
        raise ValueError("set_transfer_engine: the engine is not initialized")
    with _config_lock:
        _config["engine"], _config["engine_obj"] = int(ptr), engine


def _env_timeout_ms(name: str) -> int:
    v = os.environ.get(name)
    return int(v) if v and v.isdigit() else 0


def _create_cpu_backend(dist_backend_opts, backend_options):
    with _config_lock:
        cfg = dict(_config)
    if backend_options is not None and not isinstance(backend_options, MooncakeBackendOptions):
        raise TypeError(
            f"mooncake-cpu: pg_options must be a MooncakeBackendOptions, got {type(backend_options).__name__}"
        )
    cfg["collective_timeout_ms"] = cfg["collective_timeout_ms"] or _env_timeout_ms("MC_PG_TIMEOUT_MS")
    cfg["p2p_timeout_ms"] = cfg["p2p_timeout_ms"] or cfg["collective_timeout_ms"]
    return MooncakeProcessGroup(
        dist_backend_opts.store,
        dist_backend_opts.group_rank,
        dist_backend_opts.group_size,
        backend_options,
        cfg,
        group_id=str(getattr(dist_backend_opts, "group_id", "")),
    )


def _register() -> None:
    if "MOONCAKE-CPU" in dist.Backend._plugins:
        return
    dist.Backend.register_backend("mooncake-cpu", _create_cpu_backend, extended_api=True, devices=["cpu"])


_register()


def _backend(group) -> MooncakeProcessGroup:
    """The Mooncake group behind group (a ProcessGroup, None for WORLD)."""
    if group is None:
        group = dist.group.WORLD
    if isinstance(group, MooncakeProcessGroup):
        return group
    try:
        b = group._get_backend(torch.device("cpu"))
    except Exception:
        b = None
    if isinstance(b, MooncakeProcessGroup):
        return b
    raise TypeError(f"not a mooncake-cpu process group: {type(group).__name__}")


def _work(work) -> MooncakeWork:
    if isinstance(work, MooncakeWork):
        return work
    raise TypeError(f"not a work of a mooncake-cpu process group: {type(work).__name__}")


def get_active_ranks(backend) -> torch.Tensor:
    """One int32 per seat (max_group_size of them): 1 where the rank is active."""
    return _backend(backend).active_ranks()


def get_num_synced_ranks(backend) -> int:
    b = _backend(backend)
    return int(b._lib.mc_pg_num_synced_ranks(b._handle()))


def get_current_epoch(backend) -> int:
    b = _backend(backend)
    return int(b._lib.mc_pg_epoch(b._handle()))


def _rank_array(b: MooncakeProcessGroup, ranks):
    ranks = [int(r) for r in ranks]
    for r in ranks:
        if not 0 <= r < b.max_group_size:
            raise ValueError(f"rank {r} outside the group's {b.max_group_size} seats")
    return (ctypes.c_int32 * max(1, len(ranks)))(*ranks), len(ranks)


def get_peer_state(backend, ranks) -> list:
    """For each rank, whether it can be reached now: its engine answers a probe. For a seat that
    is not active, a rank that asked to join it (join_group) is connected to first, so a
    replacement or extension rank reads True once it is ready to be admitted."""
    b = _backend(backend)
    arr, n = _rank_array(b, ranks)
    out = (ctypes.c_int32 * max(1, n))()
    check(b._lib.mc_pg_peer_state(b._handle(), arr, n, out), "mc_pg_peer_state")
    return [bool(out[i]) for i in range(n)]


def deactivate_ranks(backend, ranks) -> ProposeViewUpdateResponse:
    """Takes ranks out of this rank's active set. A rank that names itself leaves gracefully: its
    peers drop it at once (no timeout) and it can later be replaced or rejoin."""
    b = _backend(backend)
    arr, n = _rank_array(b, ranks)
    if b.rank() in [arr[i] for i in range(n)]:
        with b._coll_lock:
            check(b._lib.mc_pg_leave(b._handle()), "mc_pg_leave")
    else:
        check(b._lib.mc_pg_deactivate(b._handle(), arr, n), "mc_pg_deactivate")
    return ProposeViewUpdateResponse(ProposalStatus.Applied, get_current_epoch(b))


def _admit(backend, ranks) -> ProposeViewUpdateResponse:
    b = _backend(backend)
    arr, n = _rank_array(b, ranks)  # range checks
    with _config_lock:
        window_ms = _config["reconciliation_ms"]
    with b._coll_lock:
        status, epoch, dropped, reason = _membership.admit(b, [arr[i] for i in range(n)], window_ms)
    return ProposeViewUpdateResponse(ProposalStatus(status), epoch, dropped, reason)


def recover_ranks(backend, ranks) -> ProposeViewUpdateResponse:
    """Every active member calls it: the ranks (a replacement in a failed seat, or an extension
    rank in a seat never used) become active once each called join_group; all members and the
    joiners go on from one epoch (one higher) and one active set."""
    return _admit(backend, ranks)


def activate_ranks(backend, ranks) -> ProposeViewUpdateResponse:
    """recover_ranks for live ranks that were deactivated (in-place rejoin): the same exchange."""
    return _admit(backend, ranks)


def join_group(backend) -> None:
    """The rank being admitted: asks the members to take it in and waits for their decision
    (the members call recover_ranks or activate_ranks)."""
    b = _backend(backend)
    with b._coll_lock:
        _membership.join(b)


def extend_group_size_to(backend, size) -> None:
    """Capacity is reserved when the group is made (max_group_size seats): extending within it
    needs nothing more (the ranks join through recover_ranks); beyond it is refused."""
    b = _backend(backend)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"extend_group_size_to: size must be a positive int, got {size!r}")
    if size > b.max_group_size:
        raise ValueError(
            f"extend_group_size_to({size}): the group has {b.max_group_size} seats "
            "(max_group_size is fixed when the group is made)"
        )


def get_failed_ranks_hint(work) -> torch.Tensor:
    """One int32 per seat: non-zero for the ranks this operation found failed."""
    return _work(work).failed_ranks_hint()


def get_local_success(work) -> bool:
    """True when every peer this rank reached in the operation answered."""
    return _work(work).local_success()


def sync_after_failure(backend) -> SyncAfterFailureResponse:
    """The survivors agree on one active set after failures (all of them call it)."""
    b = _backend(backend)
    st = ctypes.c_int(-1)
    with b._coll_lock:
        rc = b._lib.mc_pg_sync_after_failure(b._handle(), ctypes.byref(st))
    check(rc, "mc_pg_sync_after_failure")
    return SyncAfterFailureResponse(SyncAfterFailureStatus(st.value))
