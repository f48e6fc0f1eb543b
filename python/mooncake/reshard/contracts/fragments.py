"""The resource-neutral physical fragment: one contiguous view of runtime memory bound to one
logical placement fragment."""

from dataclasses import dataclass, field
from typing import Optional

from .ids import PlacementFragmentId, RuntimeFragmentId

__all__ = ["RuntimeBindingFragment"]

_U64_MAX = (1 << 64) - 1
_TEXT_FIELDS = ("placement_fragment_id", "fragment_id", "worker_id", "endpoint", "device")


def _int(value, name, minimum=0):
    # bool is an int subclass and is refused like any other non-int.
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def fits_u64(value, name):
    """An integer already checked must also fit in 64 unsigned bits (shared with the weight
    contracts' checks)."""
    if value > _U64_MAX:
        raise ValueError(f"{name} must fit in an unsigned 64-bit integer")
    return value


def _u64(value, name, minimum=0):
    return fits_u64(_int(value, name, minimum), name)


def _int_tuple(values, name, minimum):
    if type(values) not in (tuple, list):
        raise ValueError(f"{name} must be a tuple or list, not {type(values).__name__}")
    return tuple(_int(v, f"{name}[{i}]", minimum) for i, v in enumerate(values))


def _span(address, nbytes, what):
    """address and nbytes: a non-empty range starting at a non-zero address whose exclusive end
    (address + nbytes) is still a 64-bit value."""
    _u64(address, f"{what}address", 1)
    _u64(nbytes, f"{what}nbytes", 1)
    if address + nbytes > _U64_MAX:
        raise ValueError(f"{what}address range must fit in an unsigned 64-bit integer")


def _row_major_strides(shape, itemsize):
    out = [0] * len(shape)
    step = itemsize
    for i in range(len(shape) - 1, -1, -1):
        out[i] = step
        step *= shape[i]
    return tuple(out)


@dataclass(frozen=True)
class RuntimeBindingFragment:
    """Where one logical fragment lives in a runtime: ``nbytes`` at ``address``, a view of shape
    ``local_shape`` with byte strides ``strides_bytes`` into an allocation of ``storage_nbytes``
    at ``storage_address`` (``address`` is ``storage_address + storage_offset_bytes``).

    Construction validates everything and raises ValueError: non-empty string IDs, integer
    (not bool) fields, 64-bit ranges, a stride per dimension, no zero stride on a dimension
    longer than 1, and the view inside its allocation. A stride of a length-1 dimension means
    nothing, so it is normalized to the row-major one (equal views compare equal).

    ``owner`` is the framework's handle that keeps the memory alive: not compared, not shown,
    and not pickled (a binding is valid only in the process that made it)."""

    placement_fragment_id: PlacementFragmentId
    fragment_id: RuntimeFragmentId
    address: int
    nbytes: int
    worker_id: str
    endpoint: str
    device: str
    itemsize: int
    local_shape: tuple
    strides_bytes: tuple
    storage_address: int
    storage_nbytes: int
    storage_offset_bytes: int
    owner: Optional[object] = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        for name in _TEXT_FIELDS:
            v = getattr(self, name)
            if type(v) is not str or not v:
                raise ValueError(f"{name} must be a non-empty string")
        _span(self.address, self.nbytes, "")
        _int(self.itemsize, "runtime itemsize", 1)
        shape = _int_tuple(self.local_shape, "runtime local_shape", 1)
        strides = _int_tuple(self.strides_bytes, "runtime strides_bytes", 0)
        if len(strides) != len(shape):
            raise ValueError(f"runtime stride rank differs from local_shape: {len(strides)} "
                             f"strides for {len(shape)} dimensions")
        for extent, stride in zip(shape, strides):
            if extent > 1 and stride == 0:
                raise ValueError("runtime stride must be positive for non-singleton dimensions")
        canonical = _row_major_strides(shape, self.itemsize)
        strides = tuple(c if e == 1 else s for e, s, c in zip(shape, strides, canonical))
        object.__setattr__(self, "local_shape", shape)
        object.__setattr__(self, "strides_bytes", strides)
        _span(self.storage_address, self.storage_nbytes, "storage_")
        _u64(self.storage_offset_bytes, "storage_offset_bytes")
        if self.storage_address + self.storage_offset_bytes > _U64_MAX:
            raise ValueError("normalized runtime address must fit in 64 bits")
        if self.address != self.storage_address + self.storage_offset_bytes:
            raise ValueError("runtime address must equal storage_address plus "
                             "storage_offset_bytes")
        if self.storage_offset_bytes + self.nbytes > self.storage_nbytes:
            raise ValueError("runtime view exceeds storage allocation bounds")

    def __reduce__(self):
        # Everything but owner: a process that receives a fragment must bind its own memory.
        return (type(self), tuple(getattr(self, n) for n in (
            "placement_fragment_id", "fragment_id", "address", "nbytes", "worker_id",
            "endpoint", "device", "itemsize", "local_shape", "strides_bytes", "storage_address",
            "storage_nbytes", "storage_offset_bytes")))
