"""ctypes bindings of libmooncake_pg.so (mooncake/pg.h): the process group's C core.

ctypes rather than an extension module: the PG's Python side passes only integers and
addresses, and a library loaded this way carries neither the Python nor torch's C++ ABI, so
one wheel serves every torch version. ctypes releases the GIL around each call.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading

MAX_RANKS = 64

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def _candidates():
    env = os.environ.get("MC_PG_LIBRARY")
    if env:
        yield env
    import mooncake

    dirs = list(getattr(mooncake, "__path__", []))
    spec = importlib.util.find_spec("mooncake._engine")
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(spec.origin))
    for d in dirs:
        yield os.path.join(d, "libmooncake_pg.so")


def _declare(lib: ctypes.CDLL) -> None:
    P, I, S, U64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64
    I32P = ctypes.POINTER(ctypes.c_int32)
    sig = {
        "mc_pg_create": (I, [P, ctypes.POINTER(P)]),
        "mc_pg_local_address": (I, [P, ctypes.c_char_p, S]),
        "mc_pg_connect": (I, [P, ctypes.POINTER(ctypes.c_char_p), S]),
        "mc_pg_destroy": (None, [P]),
        "mc_pg_set_timeouts": (I, [P, I, I]),
        "mc_pg_broadcast": (I, [P, P, P, S, I, I, I32P]),
        "mc_pg_all_reduce": (I, [P, P, P, S, I, I, I32P]),
        "mc_pg_reduce": (I, [P, P, P, S, I, I, I, I32P]),
        "mc_pg_all_gather": (I, [P, P, P, S, I, I32P]),
        "mc_pg_reduce_scatter": (I, [P, P, P, S, I, I, I32P]),
        "mc_pg_all_to_all": (I, [P, P, P, S, I, I32P]),
        "mc_pg_gather": (I, [P, P, P, S, I, I, I32P]),
        "mc_pg_scatter": (I, [P, P, P, S, I, I, I32P]),
        "mc_pg_barrier": (I, [P, I32P]),
        "mc_pg_send": (I, [P, P, S, I, I32P]),
        "mc_pg_recv": (I, [P, P, S, I, I32P]),
        "mc_pg_active_ranks": (I, [P, I32P, S]),
        "mc_pg_epoch": (U64, [P]),
        "mc_pg_num_synced_ranks": (I, [P]),
        "mc_pg_peer_state": (I, [P, I32P, S, I32P]),
        "mc_pg_deactivate": (I, [P, I32P, S]),
        "mc_pg_sync_after_failure": (I, [P, ctypes.POINTER(I)]),
        "mc_pg_set_peer": (I, [P, I, ctypes.c_char_p]),
        "mc_pg_counters": (I, [P, ctypes.POINTER(U64), ctypes.POINTER(U64)]),
        "mc_pg_reset_seats": (I, [P, I32P, S]),
        "mc_pg_admit": (I, [P, I32P, S, U64, U64, U64]),
        "mc_pg_leave": (I, [P]),
        "mc_pg_inject_link_fault": (I, [P, I, I]),
        "mc_pg_coordinator_start": (I, [ctypes.c_char_p, ctypes.c_uint16, ctypes.POINTER(P)]),
        "mc_pg_coordinator_address": (I, [P, ctypes.c_char_p, S]),
        "mc_pg_coordinator_stop": (None, [P]),
        "mc_pg_ctrl_register": (I, [P, ctypes.c_char_p, ctypes.c_char_p, I, I]),
        "mc_pg_ctrl_join": (I, [P, I]),
        "mc_pg_ctrl_activate": (I, [P, I32P, S, I, I, P]),
        "mc_strerror": (ctypes.c_char_p, [I]),
        "mc_err_name": (ctypes.c_char_p, [I]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            if not os.path.exists(path):
                continue
            try:
                loaded = ctypes.CDLL(path)
            except OSError as e:  # pragma: no cover - a broken install
                errors.append(f"{path}: {e}")
                continue
            _declare(loaded)
            _lib = loaded
            return loaded
        raise ImportError(
            "libmooncake_pg.so not found beside the mooncake package"
            + (f" ({'; '.join(errors)})" if errors else "")
        )


class Options(ctypes.Structure):
    """struct mc_pg_options (same field order)."""

    _fields_ = [
        ("rank", ctypes.c_int),
        ("size", ctypes.c_int),
        ("max_group_size", ctypes.c_int),
        ("engine", ctypes.c_void_p),
        ("host_ip", ctypes.c_char_p),
        ("protocol", ctypes.c_char_p),
        ("collective_timeout_ms", ctypes.c_int),
        ("p2p_timeout_ms", ctypes.c_int),
        ("slot_bytes", ctypes.c_size_t),
        ("auto_deactivate_on_failure", ctypes.c_int),
    ]


class PgError(RuntimeError):
    """A C call of the PG failed; code is the MC_ERR_* value."""

    def __init__(self, what: str, code: int):
        name = lib().mc_err_name(code).decode()
        text = lib().mc_strerror(code).decode()
        super().__init__(f"{what}: {name} ({code}): {text}")
        self.code = code


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise PgError(what, rc)


def hint_array():
    return (ctypes.c_int32 * MAX_RANKS)()
