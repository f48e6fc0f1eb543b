"""The public value types of the structured object store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence

DEFAULT_BUNDLE_CHUNK_BYTES = 64 << 20
AUTO_PARALLEL_MIN_BYTES = DEFAULT_BUNDLE_CHUNK_BYTES
AUTO_PARALLEL_MIN_CHUNKS = 8
PUT_MODES = ("auto", "batch", "parallel")
COPY_MODES = ("auto", "zero_copy", "copy")


@dataclass(frozen=True)
class BundleTransferPolicy:
    """How payload chunks are written.

    ``max_inflight_put``: chunk groups written at once (threads); ``put_mode``: ``"batch"``
    (one ``batch_put_from`` per group), ``"parallel"`` (groups on threads even when small) or
    ``"auto"``; ``copy_mode``: ``"copy"`` (plain ``put`` of a bytes copy), ``"zero_copy"``
    (only from the caller's memory, never a staging copy) or ``"auto"``.
    """

    max_inflight_put: int = 1
    put_mode: Literal["auto", "batch", "parallel"] = "auto"
    copy_mode: Literal["auto", "zero_copy", "copy"] = "auto"

    def checked(self, max_inflight_put: Optional[int] = None) -> "BundleTransferPolicy":
        policy = self
        if max_inflight_put is not None:
            policy = BundleTransferPolicy(max_inflight_put, self.put_mode, self.copy_mode)
        inflight = policy.max_inflight_put
        if isinstance(inflight, bool) or not isinstance(inflight, int) or inflight < 1:
            raise ValueError("max_inflight_put must be positive")
        if policy.put_mode not in PUT_MODES:
            raise ValueError(f"unsupported put_mode: {policy.put_mode}")
        if policy.copy_mode not in COPY_MODES:
            raise ValueError(f"unsupported copy_mode: {policy.copy_mode}")
        return policy

    def for_control(self) -> "BundleTransferPolicy":
        """Manifests and metadata are small: always the copy path."""
        return BundleTransferPolicy(self.max_inflight_put, self.put_mode, "copy")


@dataclass(frozen=True)
class FieldSchema:
    """An explicit codec for one DataProto field instead of inference. ``metadata`` may hold
    ``section`` (``batch``, ``non_tensor_batch`` or ``meta_info``) and ``dtype``."""

    codec: str
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class RemoteBundleRef:
    """A stored bundle: its manifest key and (when known) the decoded manifest."""

    manifest_key: str
    manifest: dict[str, Any]


@dataclass(frozen=True, init=False)
class StructuredObjectPayload:
    """A structured object to write: JSON metadata plus named members (ndarrays, tensors,
    bytes-like values, ``tensor_object_buffer`` s)."""

    metadata: Mapping[str, Any]
    buffers: Mapping[str, Any]

    def __init__(self, metadata: Optional[Mapping[str, Any]] = None,
                 buffers: Optional[Mapping[str, Any]] = None) -> None:
        if buffers is None:
            raise TypeError("StructuredObjectPayload requires buffers")
        object.__setattr__(self, "metadata", {} if metadata is None else metadata)
        object.__setattr__(self, "buffers", buffers)


@dataclass
class StructuredObjectResult:
    """A materialized structured object: its metadata and the selected members."""

    metadata: dict[str, Any]
    objects: dict[str, Any]


@dataclass(frozen=True)
class StructuredFieldLocation:
    """Where a DataProto field lives: stage, member name inside the stage object, section."""

    stage: str
    member: str
    section: Literal["batch", "non_tensor_batch"]


@dataclass
class MooncakeDataProtoRef:
    """A DataProto stored as one structured object per stage; carries routing only (dtype,
    shape and chunk layout stay in the manifests)."""

    batch_size: int
    stage_refs: dict[str, RemoteBundleRef]
    field_index: dict[str, StructuredFieldLocation]
    meta_info: dict[str, Any]
    namespace: str = "default"
    partition: str = "default"
    global_indexes: list[int] | None = None
    encoded_non_tensor: dict[str, Any] = field(default_factory=dict)
    _storage_group_id: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class StructuredMemberSlice:
    """Rows ``start:end:step`` of a member along ``axis`` (only axis 0 is supported)."""

    axis: int
    start: int
    end: int
    step: int = 1

    def bounds(self, total_rows: int) -> tuple[int, int, int]:
        if self.axis != 0:
            raise ValueError("structured slicing supports axis=0 only")
        if self.step <= 0:
            raise ValueError("structured slicing step must be positive")
        return slice(self.start, self.end, self.step).indices(total_rows)

    def count(self, total_rows: int) -> int:
        start, end, step = self.bounds(total_rows)
        return 0 if start >= end else 1 + (end - 1 - start) // step


@dataclass(frozen=True)
class StructuredObjectReadSpec:
    """A lazy read of a structured object: which members, and row slices of some."""

    ref: RemoteBundleRef | Mapping[str, Any]
    member_names: tuple[str, ...] | None = None
    member_slices: tuple[tuple[str, StructuredMemberSlice], ...] = ()

    def select_members(self, names: Optional[Sequence[str]]) -> "StructuredObjectReadSpec":
        return StructuredObjectReadSpec(self.ref, None if names is None else tuple(names),
                                        self.member_slices)

    def slice_member(self, name: str, axis: int, start: int, end: int,
                     step: int = 1) -> "StructuredObjectReadSpec":
        slices = dict(self.member_slices)
        slices[name] = StructuredMemberSlice(axis, start, end, step)
        return StructuredObjectReadSpec(self.ref, self.member_names, tuple(slices.items()))

    def member_slice(self, name: str) -> StructuredMemberSlice | None:
        return dict(self.member_slices).get(name)


@dataclass(frozen=True)
class TensorObjectBuffer:
    """Caller memory holding one whole tensor object (the store's tensor format: header and
    data, as ``get_tensor_into`` leaves it). As a member it is written with
    ``put_tensor_from``; as a destination a tensor member is read into it."""

    ptr: int
    size: int
    owner: Any
    batch_size: int | None = None

    def __len__(self) -> int:
        if self.batch_size is None:
            raise TypeError("tensor object buffer requires batch_size for DataProto use")
        return self.batch_size


@dataclass(frozen=True)
class RawDestination:
    """Caller memory a member is read into (``pre_registered``: already registered with the
    store, e.g. a BufferPool lease)."""

    ptr: int
    size: int
    owner: Any = None
    pre_registered: bool = False


def tensor_object_buffer(ptr: int, size: int, owner: Any = None,
                         batch_size: int | None = None) -> TensorObjectBuffer:
    """Wrap ``size`` bytes at ``ptr`` (kept alive by ``owner``) holding a tensor object."""
    return TensorObjectBuffer(int(ptr), int(size), owner, batch_size)


def raw_destination(ptr: int, size: int, owner: Any = None, *,
                    pre_registered: bool = False) -> RawDestination:
    """Wrap ``size`` bytes at ``ptr`` (kept alive by ``owner``) as a read destination."""
    return RawDestination(int(ptr), int(size), owner, bool(pre_registered))


# -- payloads a member is written from (the reference's names: its tests build them) ----------

@dataclass(frozen=True)
class TensorPayload:
    """A dense torch tensor member: written as a store tensor object (header + data bytes)."""

    tensor: Any


@dataclass(frozen=True)
class MultiBufferPayload:
    """A payload given as several contiguous buffers, stored as their concatenation.
    ``owners`` keep the buffers' memory alive; with ``dtype`` and ``shape`` the member is an
    ndarray of them (the reference's typed rows), without them bytes."""

    buffers: tuple
    owners: tuple = ()
    dtype: str | None = None
    shape: tuple | None = None

    @property
    def nbytes(self) -> int:
        return sum(memoryview(b).nbytes for b in self.buffers)

    @property
    def views(self) -> tuple:
        return self.buffers


@dataclass(frozen=True)
class DirectCopyPayload:
    """Flat numpy arrays stored as their concatenation, gathered into buffer-pool memory at
    write time (one copy, no intermediate join) when a pool is there."""

    arrays: list
    total_bytes: int
    dtype: str | None = None
    shape: tuple | None = None

    @property
    def nbytes(self) -> int:
        return self.total_bytes

    @staticmethod
    def from_flat_arrays(flat_arrays, dtype, total_elems) -> "DirectCopyPayload":
        import numpy as np

        return DirectCopyPayload(list(flat_arrays), sum(a.nbytes for a in flat_arrays),
                                 np.dtype(dtype).str, (int(total_elems),))
