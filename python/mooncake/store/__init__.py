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
    "ReplicateConfig",
    "SoftPinAction",
    "Buffer",
    "StoreError",
    "MAX_KEY_LEN",
    "strerror",
    "err_name",
]


# Every code a store call can return, generated from the C side's one error table.
StoreError = _enum.IntEnum("StoreError", _STORE_ERRORS, module=__name__, qualname="StoreError")
StoreError.__doc__ = "The Store's error codes (the reference's numbers), from the C error table."


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
