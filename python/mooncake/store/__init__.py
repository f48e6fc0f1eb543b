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

from mooncake._store import STORE_ERRORS as _STORE_ERRORS
from mooncake._store import (  # noqa: F401  (re-exported)
    MAX_KEY_LEN,
    Buffer,
    MooncakeDistributedStore,
    err_name,
    strerror,
)

__all__ = [
    "MooncakeDistributedStore",
    "ReplicaStatus",
    "ReplicaDescriptor",
    "MemoryDescriptor",
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
]


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


class BufferDescriptor:
    """Where a memory replica's bytes are: ``size_`` bytes at ``buffer_address_`` in the memory
    of the engine whose segment is ``transport_endpoint_`` (the reference's field names)."""

    __slots__ = ("size_", "buffer_address_", "transport_endpoint_")

    def __init__(self, size_=0, buffer_address_=0, transport_endpoint_=""):
        self.size_ = size_
        self.buffer_address_ = buffer_address_
        self.transport_endpoint_ = transport_endpoint_

    def __repr__(self):
        return (f"<BufferDescriptor size={self.size_} buffer_address={self.buffer_address_} "
                f"transport_endpoint={self.transport_endpoint_}>")


class MemoryDescriptor:
    """A memory replica: its ``buffer_descriptor``."""

    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class ReplicaDescriptor:
    """One replica of an object, as ``get_replica_desc`` returns it. Every replica here is in
    memory (this build has no disk tier)."""

    __slots__ = ("status", "_memory")

    def __init__(self, status, memory):
        self.status = ReplicaStatus(status)
        self._memory = memory

    def is_memory_replica(self):
        return True

    def is_disk_replica(self):
        return False

    def is_local_disk_replica(self):
        return False

    def get_memory_descriptor(self):
        return self._memory

    def get_disk_descriptor(self):
        raise RuntimeError("not a disk replica")

    def __repr__(self):
        return f"<ReplicaDescriptor {self.status.name} {self._memory.buffer_descriptor!r}>"


def _descriptors(raw):
    code, reps = raw
    return [ReplicaDescriptor(st, MemoryDescriptor(BufferDescriptor(size, addr, endpoint)))
            for endpoint, addr, size, st in reps] if code == 0 else []


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
MooncakeDistributedStore.batch_get_replica_desc = _batch_get_replica_desc

# The tensor methods (put_tensor, get_tensor, ...); torch is imported only when one is called.
from mooncake.store._tensor import ParallelAxis, ReadTarget, TensorParallelism  # noqa: E402


class SoftPinAction(_enum.IntEnum):
    """How a put treats soft pinning: not at all, or pinned (evicted after unpinned objects)."""

    NONE = 0
    SOFT_PIN = 1


class ReplicateConfig:
    """Placement of one put: ``replica_num`` copies on distinct segments (best effort),
    optionally soft-pinned (evicted last, for ``soft_pin_ttl_ms`` or the master's default) or
    hard-pinned (never evicted), preferring the named segments (``get_hostname()`` of their
    owners) when they have room."""

    __slots__ = ("replica_num", "with_soft_pin", "soft_pin_ttl_ms", "with_hard_pin",
                 "preferred_segment", "preferred_segments")

    def __init__(self, replica_num=1, with_soft_pin=False, soft_pin_ttl_ms=None,
                 with_hard_pin=False, preferred_segment="", preferred_segments=None):
        self.replica_num = replica_num
        self.with_soft_pin = with_soft_pin
        self.soft_pin_ttl_ms = soft_pin_ttl_ms
        self.with_hard_pin = with_hard_pin
        self.preferred_segment = preferred_segment
        self.preferred_segments = list(preferred_segments) if preferred_segments else []

    @property
    def soft_pin_action(self):
        return SoftPinAction.SOFT_PIN if self.with_soft_pin else SoftPinAction.NONE

    def __repr__(self):
        return ("ReplicateConfig(replica_num={0.replica_num}, with_soft_pin={0.with_soft_pin}, "
                "soft_pin_ttl_ms={0.soft_pin_ttl_ms}, with_hard_pin={0.with_hard_pin}, "
                "preferred_segment={0.preferred_segment!r}, "
                "preferred_segments={0.preferred_segments!r})".format(self))
