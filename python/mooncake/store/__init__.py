"""Mooncake Store: a distributed KV cache for KVCache blocks.

Same names and return conventions as the reference Mooncake's ``mooncake.store``::

    from mooncake.store import MooncakeDistributedStore, ReplicateConfig

    store = MooncakeDistributedStore()
    store.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", "127.0.0.1:50051")
    store.put("key", b"value")            # 0
    store.get("key")                      # b"value" (b"" on a miss)

Put-type calls return exactly 0 on success; get-into calls return the object's byte length;
``is_exist`` returns 1, 0 or -1; failures are the reference's negative codes (``strerror(code)``
explains one). Only wrong argument types (``TypeError``, naming an unknown keyword) and values
(``ValueError``) raise. All logic lives in the C client (``mooncake/store.h``).
"""

import enum as _enum

from mooncake.store import _methods, _tensor
from mooncake.store._extras import (  # noqa: F401  (re-exported)
    Descriptor,
    DiskDescriptor,
    LocalDiskDescriptor,
    MemoryDescriptor,
    ObjectDataType,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicaType,
    bind_to_numa_node,
)
from mooncake.store._extras import checked_property as _checked
from mooncake.store._tasks import QueryTaskResponse, TaskStatus, TaskType  # noqa: F401
# The tensor types; torch is imported only when a tensor method is called.
from mooncake.store._tensor import ParallelAxis, ReadTarget, TensorParallelism  # noqa: F401

from mooncake._store import STORE_ERRORS as _STORE_ERRORS
from mooncake._store import (  # noqa: F401  (re-exported)
    MAX_KEY_LEN,
    Buffer,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    err_name,
    strerror,
)

# The reference's name for what get_buffer returns: the same class (ptr(), size(), len, buffer
# protocol), so isinstance checks and annotations written for the reference hold.
BufferHandle = Buffer


def get_alloc_func_addr():
    """The reference's SPDK NVMe-oF hugepage allocator hook (for PyTorch's pluggable
    allocator). That tier is not in this build: raises RuntimeError naming it; shared host
    memory a storage node moves without a copy comes from MooncakeHostMemAllocator."""
    raise RuntimeError("get_alloc_func_addr: the SPDK NVMe-oF (NoF) hugepage allocator is not "
                       "in this build; use MooncakeHostMemAllocator for pool memory")


def get_free_func_addr():
    """The free hook paired with get_alloc_func_addr; RuntimeError for the same reason."""
    raise RuntimeError("get_free_func_addr: the SPDK NVMe-oF (NoF) hugepage allocator is not "
                       "in this build; use MooncakeHostMemAllocator for pool memory")


__all__ = [
    "MooncakeDistributedStore",
    "MooncakeHostMemAllocator",
    "Descriptor",
    "ObjectDataType",
    "bind_to_numa_node",
    "ReplicaStatus",
    "ReplicaDescriptor",
    "MemoryDescriptor",
    "LocalDiskDescriptor",
    "DiskDescriptor",
    "ReplicaType",
    "BufferDescriptor",
    "ReplicateConfig",
    "SoftPinAction",
    "Buffer",
    "BufferHandle",
    "StoreError",
    "MAX_KEY_LEN",
    "strerror",
    "err_name",
    "ParallelAxis",
    "TensorParallelism",
    "ReadTarget",
    "TaskType",
    "TaskStatus",
    "QueryTaskResponse",
]


def __getattr__(name):
    # The reference also exposes the buffer pools here; loaded on first use (pure Python).
    if name in ("BufferPool", "RegisteredBufferPool"):
        from mooncake import buffer_pool

        return getattr(buffer_pool, name)
    if name in ("EngramStore", "EngramStoreConfig"):  # needs NumPy: loaded on first use
        from mooncake.store import _engram

        return getattr(_engram, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Every code a store call can return, generated from the C side's one error table.
# (mypy cannot see members made from a table at import time)
StoreError = _enum.IntEnum(  # type: ignore[misc]
    "StoreError", _STORE_ERRORS, module=__name__, qualname="StoreError")
StoreError.__doc__ = "The Store's error codes (the reference's numbers), from the C error table."


# The reference's binding exports these enums' values at module level too (pybind11's
# export_values), in this order, so TaskStatus's PROCESSING and FAILED are the ones that stay.
for _enum_type in (ObjectDataType, ReplicaStatus, TaskType, TaskStatus):
    globals().update(_enum_type.__members__)
del _enum_type

# A memory replica's buffer_descriptor is the reference's Descriptor, under its older name too.
BufferDescriptor = Descriptor

# Every Python-side method of the store type, attached here, once (the list is _methods.METHODS).
_methods.attach(MooncakeDistributedStore)

# The reference's module-level tensor helpers, under its (private) names.
_serialize_tensor = _tensor.serialize_tensor
_deserialize_tensor = _tensor.deserialize_tensor
_tensor_metadata_size = _tensor.tensor_metadata_size


class SoftPinAction(_enum.IntEnum):
    """What a put or upsert does to soft pinning (a soft-pinned object is evicted only after
    every unpinned one), numbered as the reference's: PRESERVE keeps what an upserted object
    had (a new object is not pinned), ENABLE pins it, DISABLE unpins it. ``NONE`` and
    ``SOFT_PIN`` are this package's older names for PRESERVE and ENABLE."""

    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2
    NONE = 0
    SOFT_PIN = 1


_U64_MAX = (1 << 64) - 1


# ReplicateConfig's checked attributes: the value to keep, or TypeError as the reference's binding.
def _soft_pin_action(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"soft_pin_action must be a SoftPinAction, not {type(value).__name__}")
    return SoftPinAction(value)


def _soft_pin_ttl_ms(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 <= value <= _U64_MAX):
        raise TypeError("soft_pin_ttl_ms must be None or an int in [0, 2**64)")
    return value


def _group_ids(value):
    if value is not None:
        value = list(value)
        if not all(isinstance(g, str) for g in value):
            raise TypeError("group_ids must be None or a list of str")
    return value


def _absent_tier_count(tier):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"{tier[0]} must be a non-negative int")
        if value:
            raise ValueError(f"{tier[0]}={value}: the {tier[1]} tier is not in this build "
                             "(only 0, memory replicas, can be asked for)")
        return value
    return check


def _absent_tier_segments(value):
    value = list(value) if value is not None else []
    if not all(isinstance(v, str) for v in value):
        raise TypeError("preferred_nof_segments must be a list of str")
    if value:
        raise ValueError("preferred_nof_segments: the NVMe-oF tier is not in this build "
                         "(no NoF segment can be preferred)")
    return value


def _bool_field(name):
    def check(value):
        if not isinstance(value, (bool, int)):
            raise TypeError(f"{name} must be a bool")
        return bool(value)
    return check


def _data_type(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"data_type must be an ObjectDataType, not {type(value).__name__}")
    return ObjectDataType(value)


class ReplicateConfig:
    """Placement of one put: ``replica_num`` copies on distinct segments (best effort), a soft
    pin action (``soft_pin_action``, with ``soft_pin_ttl_ms`` in milliseconds for ENABLE, or
    the master's default when None), or a hard pin (never evicted), preferring the named
    segments (``get_hostname()`` of their owners) when they have room.

    ``with_soft_pin`` is the older boolean spelling (True is ENABLE). ``group_ids`` (None, or
    one id per key of a batch, "" for none) is accepted as the reference's is, but groups change
    no placement or eviction here (docs/compatibility.md).

    The reference's fields of its other tiers are here with their defaults:
    ``nof_replica_num`` / ``preferred_nof_segments`` (NVMe-oF) and ``dfs_replica_num`` (its
    shared-filesystem replicas) must stay 0 / empty, since those tiers are not in this build (a
    ValueError says so); ``data_type`` (an ObjectDataType) and ``prefer_alloc_in_same_node`` are
    hints that change no placement here.
    """

    __slots__ = ("replica_num", "_soft_pin_action", "_soft_pin_ttl_ms", "with_hard_pin",
                 "preferred_segment", "preferred_segments", "_group_ids", "_nof_replica_num",
                 "_dfs_replica_num", "_preferred_nof_segments", "_prefer_alloc_in_same_node",
                 "_data_type")

    def __init__(self, replica_num=1, with_soft_pin=False, soft_pin_ttl_ms=None,
                 with_hard_pin=False, preferred_segment="", preferred_segments=None,
                 soft_pin_action=None, group_ids=None):
        self.replica_num = replica_num
        self.soft_pin_action = (SoftPinAction.ENABLE if with_soft_pin else SoftPinAction.PRESERVE
                                ) if soft_pin_action is None else soft_pin_action
        self.soft_pin_ttl_ms = soft_pin_ttl_ms
        self.with_hard_pin = with_hard_pin
        self.preferred_segment = preferred_segment
        self.preferred_segments = list(preferred_segments) if preferred_segments else []
        self.group_ids = group_ids
        self._nof_replica_num = self._dfs_replica_num = 0
        self._preferred_nof_segments = []
        self._prefer_alloc_in_same_node = False
        self._data_type = ObjectDataType.UNKNOWN

    soft_pin_action = _checked("_soft_pin_action", _soft_pin_action)
    soft_pin_ttl_ms = _checked("_soft_pin_ttl_ms", _soft_pin_ttl_ms)
    group_ids = _checked("_group_ids", _group_ids)
    nof_replica_num = _checked("_nof_replica_num", _absent_tier_count(("nof_replica_num",
                                                                       "NVMe-oF")))
    dfs_replica_num = _checked("_dfs_replica_num", _absent_tier_count(("dfs_replica_num",
                                                                       "DFS")))
    preferred_nof_segments = _checked("_preferred_nof_segments", _absent_tier_segments)
    prefer_alloc_in_same_node = _checked("_prefer_alloc_in_same_node",
                                         _bool_field("prefer_alloc_in_same_node"))
    data_type = _checked("_data_type", _data_type)

    @property
    def with_soft_pin(self):
        return self._soft_pin_action == SoftPinAction.ENABLE

    @with_soft_pin.setter
    def with_soft_pin(self, value):
        if value:
            self._soft_pin_action = SoftPinAction.ENABLE
        elif self._soft_pin_action == SoftPinAction.ENABLE:
            self._soft_pin_action = SoftPinAction.PRESERVE

    def __repr__(self):
        return ("ReplicateConfig(replica_num={0.replica_num}, "
                "soft_pin_action={0.soft_pin_action.name}, "
                "soft_pin_ttl_ms={0.soft_pin_ttl_ms}, with_hard_pin={0.with_hard_pin}, "
                "preferred_segment={0.preferred_segment!r}, "
                "preferred_segments={0.preferred_segments!r}, "
                "group_ids={0.group_ids!r})".format(self))

    __str__ = __repr__
