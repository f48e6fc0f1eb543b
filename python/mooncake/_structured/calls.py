"""Single store calls: method lookup on a duck-typed store, statuses, and the write configs
(one logical group id expanded over the keys of a call)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np

OBJECT_NOT_FOUND = -704
_CONFIG_FIELDS = ("data_type", "group_ids", "nof_replica_num", "prefer_alloc_in_same_node",
                  "preferred_nof_segments", "preferred_segment", "preferred_segments",
                  "replica_num", "with_hard_pin", "with_soft_pin", "soft_pin_action",
                  "soft_pin_ttl_ms")


class PayloadMissingError(KeyError):
    """A payload object of a bundle is not in the store (removed, evicted or never written)."""

    def __str__(self):
        return str(self.args[0]) if self.args else "payload missing"


def _method(store, name):
    fn = getattr(store, name, None)
    return fn if callable(fn) else None


def address_of(view):
    """The address of a contiguous buffer (read-only ones too)."""
    arr = np.frombuffer(view, dtype=np.uint8) if not isinstance(view, np.ndarray) else view
    return int(arr.ctypes.data) if arr.size else 0


def _status_ok(status):
    return status is None or status == 0


def check_status(status, operation, key):
    if not _status_ok(status):
        raise RuntimeError(f"{operation} failed for {key}: {status}")


# -- write configs -----------------------------------------------------------------------------

def copy_config(config):
    try:
        return copy.copy(config)
    except TypeError:
        pass
    try:
        fresh = type(config)()
    except Exception as error:
        raise TypeError("structured object store config must be copyable or "
                        "default-constructible") from error
    for name in _CONFIG_FIELDS:
        if hasattr(config, name):
            value = getattr(config, name)
            setattr(fresh, name, list(value) if isinstance(value, (list, tuple)) else value)
    return fresh


def single_group_id(config):
    """The one logical group id of ``config.group_ids`` (None: none given; "": ungrouped)."""
    raw = getattr(config, "group_ids", None) if config is not None else None
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    try:
        ids = list(raw)
    except TypeError as error:
        raise ValueError("structured object store config.group_ids must contain strings") \
            from error
    if len(ids) > 1:
        raise ValueError("structured object store config.group_ids must contain exactly one "
                         "logical group id; it is expanded across internal Mooncake keys")
    if not ids:
        return None
    if not isinstance(ids[0], str):
        raise ValueError("structured object store config.group_ids must contain strings")
    return ids[0]


def config_for_keys(config, count):
    """``config`` with its one group id repeated for each of ``count`` keys."""
    if config is None or count <= 0:
        return config
    raw = getattr(config, "group_ids", None)
    if raw is None:
        return config
    gid = single_group_id(config)
    if gid is not None and count == 1 and not isinstance(raw, str):
        return config
    out = copy_config(config)
    out.group_ids = None if gid is None else [gid] * count
    return out


def config_with_group(config, group_id):
    current = single_group_id(config)
    if current and current != group_id:
        raise ValueError("config.group_ids conflicts with the DataProto storage group")
    if config is None:
        try:
            from mooncake.store import ReplicateConfig

            out = ReplicateConfig()
        except Exception:  # the store extension is not importable: a duck-typed config
            out = SimpleNamespace()
    else:
        out = copy_config(config)
    out.group_ids = [group_id]
    return out


def _call_write(fn, *args, config=None):
    return fn(*args) if config is None else fn(*args, config=config)
