"""The model-weight tensor and logical fragment contracts: parallel ranks and axes, tensor
descriptors, and address-free placement fragments."""

from dataclasses import asdict, dataclass
from math import prod
from typing import Literal, Optional, Union

from ..contracts import PlacementFragmentId, ResourceKind, RuntimeBindingFragment, TensorId
from . import _checks as ck

__all__ = [
    "OwnershipAxis",
    "ParallelAxis",
    "ParallelRank",
    "PlacementFragment",
    "ReplicatedAxis",
    "RuntimeBindingFragment",
    "SplitAxis",
    "TensorDescriptor",
    "canonical_strides_bytes",
    "validate_fragment_geometry",
]

ParallelAxisKind = Literal["dp", "pp", "ep", "tp"]
SplitAxisKind = Literal["ep", "tp"]
# The canonical order of axes in a descriptor.
_AXIS_ORDER = {"dp": 0, "pp": 1, "ep": 2, "tp": 3}


def _axis_kind(kind):
    ck.text(kind, "parallel axis kind")
    if kind not in _AXIS_ORDER:
        raise ValueError(f"unsupported parallel axis kind: {kind}")
    return kind


class ModelWeightResource:
    """What every model-weight manifest (placement, stored manifest, runtime binding) says of
    its kind: one definition of ``resource_kind`` for the ResourceManifest protocol."""

    __slots__ = ()

    @property
    def resource_kind(self) -> ResourceKind:
        return ResourceKind.MODEL_WEIGHT


@dataclass(frozen=True)
class ParallelRank:
    """A participant's coordinates on the four parallel axes, used to route fragments (the
    logical sharding itself is in the fragments' boxes and the descriptors' axes)."""

    dp: int = 0
    tp: int = 0
    pp: int = 0
    ep: int = 0

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "ep"):
            ck.integer(getattr(self, name), f"parallel rank {name}", 0)


@dataclass(frozen=True)
class SplitAxis:
    """A parallel axis (tp or ep) whose ranks together partition dimension ``dim``; EP splits
    the leading (expert) dimension only."""

    kind: SplitAxisKind
    dim: int

    def __post_init__(self):
        _axis_kind(self.kind)
        if self.kind not in ("ep", "tp"):
            raise ValueError(f"{self.kind} cannot use split semantics")
        ck.integer(self.dim, "split axis dim", 0)
        if self.kind == "ep" and self.dim != 0:
            raise ValueError("EP must split the leading logical expert dimension")


@dataclass(frozen=True)
class ReplicatedAxis:
    """A parallel axis whose every rank holds a complete copy."""

    kind: ParallelAxisKind

    def __post_init__(self):
        _axis_kind(self.kind)


@dataclass(frozen=True)
class OwnershipAxis:
    """A parallel axis where only the ranks that declare the tensor hold it."""

    kind: ParallelAxisKind

    def __post_init__(self):
        _axis_kind(self.kind)


ParallelAxis = Union[SplitAxis, ReplicatedAxis, OwnershipAxis]


@dataclass(frozen=True)
class TensorDescriptor:
    """One logical tensor: identity, full shape, dtype and item size, the sorted dimensions its
    split axes shard (``shard_dims``), a layout fingerprint, its parallel axes (stored in the
    order dp, pp, ep, tp), and optional layer and expert numbers."""

    tensor_id: TensorId
    global_shape: tuple
    dtype: str
    itemsize: int
    shard_dims: tuple
    layout_fingerprint: str
    parallel_axes: tuple
    layer_id: Optional[int] = None
    expert_id: Optional[int] = None

    def __post_init__(self):
        shape = ck.int_tuple(self.global_shape, "global_shape", 1)
        if not shape:
            raise ValueError("global_shape must not be empty")
        ck.text(self.tensor_id, "tensor_id")
        ck.text(self.dtype, "dtype")
        ck.integer(self.itemsize, "itemsize", 1)
        dims = ck.int_tuple(self.shard_dims, "shard_dims", 0)
        if len(set(dims)) != len(dims):
            raise ValueError("shard_dims must not contain duplicates")
        if list(dims) != sorted(dims):
            raise ValueError("shard_dims must be sorted")
        if any(d >= len(shape) for d in dims):
            raise ValueError("shard_dims contains an out-of-range dimension")
        axes = ck.sequence(self.parallel_axes, "TensorDescriptor parallel_axes")
        if not all(isinstance(a, (SplitAxis, ReplicatedAxis, OwnershipAxis)) for a in axes):
            raise ValueError("TensorDescriptor parallel_axes must contain explicit axis values")
        axes = tuple(sorted(axes, key=lambda a: _AXIS_ORDER[a.kind]))
        kinds = [a.kind for a in axes]
        if len(set(kinds)) != len(kinds):
            raise ValueError("parallel_axes must not contain duplicate kinds")
        split = [a.dim for a in axes if isinstance(a, SplitAxis)]
        if len(set(split)) != len(split):
            raise ValueError("split axes must not share a dimension")
        if any(d >= len(shape) for d in split):
            raise ValueError("split axis dimension is out of range")
        if tuple(sorted(split)) != dims:
            raise ValueError("parallel axis split dimensions conflict with shard_dims")
        for name in ("layer_id", "expert_id"):
            if getattr(self, name) is not None:
                ck.integer(getattr(self, name), name, 0)
        if self.expert_id is not None and any(
                isinstance(a, SplitAxis) and a.kind == "ep" for a in axes):
            raise ValueError("an individually allocated expert requires explicit EP ownership")
        ck.text(self.layout_fingerprint, "layout_fingerprint")
        object.__setattr__(self, "global_shape", shape)
        object.__setattr__(self, "shard_dims", dims)
        object.__setattr__(self, "parallel_axes", axes)


def validate_fragment_geometry(tensor, *, fragment_id, global_offset, local_shape, nbytes):
    """ValueError unless the box has the tensor's rank, lies inside it, and nbytes is its
    element count times the item size."""
    rank = len(tensor.global_shape)
    if len(global_offset) != rank or len(local_shape) != rank:
        raise ValueError(f"fragment rank mismatch: {fragment_id}")
    for begin, extent, total in zip(global_offset, local_shape, tensor.global_shape):
        if begin + extent > total:
            raise ValueError(f"fragment is out of bounds: {fragment_id}")
    want = prod(local_shape) * tensor.itemsize
    if nbytes != want:
        raise ValueError(f"fragment byte size mismatch: {fragment_id}: expected {want}, "
                         f"got {nbytes}")


def canonical_strides_bytes(shape, itemsize):
    """Row-major byte strides of a dense array of shape."""
    out = []
    step = itemsize
    for extent in reversed(tuple(shape)):
        out.append(step)
        step *= extent
    return tuple(reversed(out))


def _aliases(value):
    names = ck.sequence(value, "aliases")
    if any(type(a) is not str or not a for a in names):
        raise ValueError("aliases must contain non-empty strings")
    if len(set(names)) != len(names):
        raise ValueError("aliases must not contain duplicates")
    return tuple(TensorId(a) for a in sorted(names))


@dataclass(frozen=True, init=False)
class PlacementFragment:
    """An address-free box of one tensor (``global_offset``, ``local_shape``, ``nbytes``) held by
    one parallel rank, with its optional pipeline stage and alias group (the sorted IDs of the
    tensors that share its storage, itself included).

    Without ``placement_fragment_id`` the ID is derived from the content ("sha256:..."), so the
    same fragment has the same ID in every process."""

    tensor_id: TensorId
    global_offset: tuple
    local_shape: tuple
    nbytes: int
    rank: ParallelRank
    pipeline_stage_id: Optional[int]
    aliases: tuple
    placement_fragment_id: PlacementFragmentId

    def __init__(self, tensor_id: TensorId, global_offset: tuple, local_shape: tuple,
                 nbytes: int, rank: ParallelRank, pipeline_stage_id: Optional[int] = None,
                 aliases: tuple = (),
                 placement_fragment_id: Optional[PlacementFragmentId] = None) -> None:
        offset = ck.int_tuple(global_offset, "global_offset", 0)
        shape = ck.int_tuple(local_shape, "local_shape", 1)
        ck.text(tensor_id, "tensor_id")
        ck.u64(nbytes, "nbytes", 1)
        if not isinstance(rank, ParallelRank):
            raise ValueError("rank must be a ParallelRank")
        if pipeline_stage_id is not None:
            ck.integer(pipeline_stage_id, "pipeline_stage_id", 0)
        group = _aliases(aliases)
        if group and len(group) < 2:
            raise ValueError("alias group must contain at least two tensor IDs")
        if group and tensor_id not in group:
            raise ValueError("alias group must contain the fragment tensor_id")
        if placement_fragment_id is None:
            content = {"schema": "weight-placement-fragment", "tensor_id": tensor_id,
                       "global_offset": list(offset), "local_shape": list(shape),
                       "nbytes": nbytes, "rank": asdict(rank), "aliases": list(group)}
            if pipeline_stage_id is not None:
                content["pipeline_stage_id"] = pipeline_stage_id
            placement_fragment_id = PlacementFragmentId(ck.content_id(content))
        else:
            ck.text(placement_fragment_id, "placement_fragment_id")
        for name, value in (("tensor_id", tensor_id), ("global_offset", offset),
                            ("local_shape", shape), ("nbytes", nbytes), ("rank", rank),
                            ("pipeline_stage_id", pipeline_stage_id), ("aliases", group),
                            ("placement_fragment_id", placement_fragment_id)):
            object.__setattr__(self, name, value)

    @property
    def fragment_id(self) -> PlacementFragmentId:
        """The same as placement_fragment_id."""
        return self.placement_fragment_id
