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

from mooncake.store import _extras, _ranges, _tasks
from mooncake.store._extras import Descriptor, ObjectDataType, bind_to_numa_node  # noqa: F401
from mooncake.store._tasks import QueryTaskResponse, TaskStatus, TaskType  # noqa: F401

from mooncake._store import STORE_ERRORS as _STORE_ERRORS
from mooncake._store import (  # noqa: F401  (re-exported)
    MAX_KEY_LEN,
    Buffer,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    err_name,
    strerror,
)

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
    "ReplicaType",
    "BufferDescriptor",
    "ReplicateConfig",
    "SoftPinAction",
    "Buffer",
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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Every code a store call can return, generated from the C side's one error table.
StoreError = _enum.IntEnum("StoreError", _STORE_ERRORS, module=__name__, qualname="StoreError")
StoreError.__doc__ = "The Store's error codes (the reference's numbers), from the C error table."


class ReplicaStatus(_enum.IntEnum):
    """A replica's state, numbered as the reference's ``ReplicaStatus``."""

    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


# A memory replica's buffer_descriptor is the reference's Descriptor, under its older name too.
BufferDescriptor = Descriptor


class MemoryDescriptor:
    """A memory replica: its ``buffer_descriptor``."""

    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class LocalDiskDescriptor:
    """A LOCAL_DISK replica: the storage node's disk tier that serves it (``transport_endpoint``,
    "host:port" of its read server) and the object's size."""

    __slots__ = ("transport_endpoint", "object_size")

    def __init__(self, transport_endpoint, object_size):
        self.transport_endpoint = transport_endpoint
        self.object_size = object_size

    def __repr__(self):
        return f"<LocalDiskDescriptor {self.transport_endpoint} {self.object_size}>"


class ReplicaType(_enum.IntEnum):
    """The reference's replica types."""

    MEMORY = 0
    DISK = 1
    LOCAL_DISK = 2

    def __str__(self):
        return f"ReplicaType.{self.name}"  # as the reference's enum prints


class ReplicaDescriptor:
    """One replica of an object, as ``get_replica_desc`` returns it: in memory, or on a storage
    node's disk tier (LOCAL_DISK; the master lists those last)."""

    __slots__ = ("status", "type", "_memory", "_disk")

    def __init__(self, status, memory, disk=None):
        self.status = ReplicaStatus(status)
        self.type = ReplicaType.LOCAL_DISK if disk is not None else ReplicaType.MEMORY
        self._memory = memory
        self._disk = disk

    def is_memory_replica(self):
        return self._disk is None

    def is_disk_replica(self):
        return False  # the shared-filesystem tier (DISK) is not built; LOCAL_DISK is below

    def is_local_disk_replica(self):
        return self._disk is not None

    def get_memory_descriptor(self):
        if self._disk is not None:
            raise RuntimeError("not a memory replica")
        return self._memory

    def get_disk_descriptor(self):
        raise RuntimeError("not a disk replica")

    def get_local_disk_descriptor(self):
        if self._disk is None:
            raise RuntimeError("not a local disk replica")
        return self._disk

    def __repr__(self):
        if self._disk is not None:
            return f"<ReplicaDescriptor {self.status.name} LOCAL_DISK {self._disk!r}>"
        return f"<ReplicaDescriptor {self.status.name} {self._memory.buffer_descriptor!r}>"


def _descriptor(endpoint, addr, size, status, is_disk):
    if is_disk:
        return ReplicaDescriptor(status, None, LocalDiskDescriptor(endpoint, size))
    return ReplicaDescriptor(status, MemoryDescriptor(Descriptor(size, addr, endpoint)))


def _descriptors(raw):
    code, reps = raw
    return [_descriptor(*r) for r in reps] if code == 0 else []


def _get_replica_desc(self, key):
    """The replicas of ``key`` (a list of ReplicaDescriptor; empty when it is missing). Asking
    grants a lease, as a get does."""
    return _descriptors(self.batch_replica_desc_raw([key])[0])


def _batch_get_replica_desc(self, keys):
    """``{key: [ReplicaDescriptor, ...]}`` for every key, in one master round trip (an empty
    list for a missing key)."""
    keys = list(keys)
    return {k: _descriptors(r) for k, r in zip(keys, self.batch_replica_desc_raw(keys))}


MooncakeDistributedStore.get_replica_desc = _get_replica_desc
_ranges.attach(MooncakeDistributedStore)
_extras.attach(MooncakeDistributedStore)
_tasks.attach(MooncakeDistributedStore)
MooncakeDistributedStore.batch_get_replica_desc = _batch_get_replica_desc

# The tensor methods (put_tensor, get_tensor, ...); torch is imported only when one is called.
from mooncake.store._tensor import ParallelAxis, ReadTarget, TensorParallelism  # noqa: E402
from mooncake.store import _tensor  # noqa: E402

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


class ReplicateConfig:
    """Placement of one put: ``replica_num`` copies on distinct segments (best effort), a soft
    pin action (``soft_pin_action``, with ``soft_pin_ttl_ms`` in milliseconds for ENABLE, or
    the master's default when None), or a hard pin (never evicted), preferring the named
    segments (``get_hostname()`` of their owners) when they have room.

    ``with_soft_pin`` is the older boolean spelling (True is ENABLE). ``group_ids`` (None, or
    one id per key of a batch, "" for none) is accepted as the reference's is, but groups change
    no placement or eviction here (docs/compatibility.md).
    """

    __slots__ = ("replica_num", "_soft_pin_action", "_soft_pin_ttl_ms", "with_hard_pin",
                 "preferred_segment", "preferred_segments", "_group_ids")

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

    @property
    def soft_pin_action(self):
        return self._soft_pin_action

    @soft_pin_action.setter
    def soft_pin_action(self, value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"soft_pin_action must be a SoftPinAction, not {type(value).__name__}")
        self._soft_pin_action = SoftPinAction(value)

    @property
    def with_soft_pin(self):
        return self._soft_pin_action == SoftPinAction.ENABLE

    @with_soft_pin.setter
    def with_soft_pin(self, value):
        if value:
            self._soft_pin_action = SoftPinAction.ENABLE
        elif self._soft_pin_action == SoftPinAction.ENABLE:
            self._soft_pin_action = SoftPinAction.PRESERVE

    @property
    def soft_pin_ttl_ms(self):
        return self._soft_pin_ttl_ms

    @soft_pin_ttl_ms.setter
    def soft_pin_ttl_ms(self, value):
        # As the reference's binding: None or an unsigned 64-bit int, else TypeError.
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= _U64_MAX):
            raise TypeError("soft_pin_ttl_ms must be None or an int in [0, 2**64)")
        self._soft_pin_ttl_ms = value

    @property
    def group_ids(self):
        return self._group_ids

    @group_ids.setter
    def group_ids(self, value):
        if value is not None:
            value = list(value)
            if not all(isinstance(g, str) for g in value):
                raise TypeError("group_ids must be None or a list of str")
        self._group_ids = value

    def __repr__(self):
        return ("ReplicateConfig(replica_num={0.replica_num}, "
                "soft_pin_action={0.soft_pin_action.name}, "
                "soft_pin_ttl_ms={0.soft_pin_ttl_ms}, with_hard_pin={0.with_hard_pin}, "
                "preferred_segment={0.preferred_segment!r}, "
                "preferred_segments={0.preferred_segments!r}, "
                "group_ids={0.group_ids!r})".format(self))

    __str__ = __repr__
