"""The logical planner's results: transfer regions, executors, pipeline route groups, limits
and the plan itself. Every one checks itself on construction (ValueError)."""

from dataclasses import dataclass, field
from math import prod
from types import MappingProxyType
from typing import ClassVar, Generic, Optional, TypeVar

from ...contracts import ParticipantId, PlacementId, ResourceId, RevisionId
from ...contracts import TensorId
from ...geometry import box_contains
from ..placement import WeightPlacementManifest
from ..storage_manifest import (StoredFragment, StoredManifestIdentity, WeightManifest,
                                validate_weight_manifest_snapshot)
from ..types import ParallelRank, PlacementFragment
from .fragments import GeometryFragment, LogicalSourceFragment, LogicalTargetFragment
from .geometry import _derive_region_geometry, _fragment_itemsize, _validate_outer_strides

__all__ = ["LogicalTransferPlan", "PlanningLimits", "PipelineRouteGroup", "PlacementExecutorPlan",
           "RuntimeTensorOwner", "LogicalTransferOperation", "LogicalTransferRegion",
           "TransferRegion"]

# A tensor's owner on a rank: its ownership axes' coordinates, ((kind, value), ...).
RuntimeTensorOwner = tuple
_S = TypeVar("_S", bound=GeometryFragment)
_T = TypeVar("_T", bound=GeometryFragment)


def _nonneg(value):
    return type(value) is int and value >= 0


@dataclass(frozen=True)
class PipelineRouteGroup:
    """The operations that go from one source pipeline stage to one target stage."""

    source_pp: Optional[int]
    source_pipeline_stage_id: Optional[int]
    target_pp: int
    target_pipeline_stage_id: Optional[int]
    operation_indices: tuple

    def __post_init__(self):
        object.__setattr__(self, "operation_indices", tuple(self.operation_indices))
        if self.source_pp is not None and not _nonneg(self.source_pp):
            raise ValueError("pipeline route source_pp must be non-negative")
        if not _nonneg(self.target_pp):
            raise ValueError("pipeline route target_pp must be non-negative")
        for name in ("source_pipeline_stage_id", "target_pipeline_stage_id"):
            v = getattr(self, name)
            if v is not None and not _nonneg(v):
                raise ValueError(f"pipeline route {name} must be non-negative")
        if not all(_nonneg(i) for i in self.operation_indices):
            raise ValueError("pipeline route indices must be non-negative integers")
        if len(set(self.operation_indices)) != len(self.operation_indices):
            raise ValueError("pipeline route has duplicate operation indices")


@dataclass(frozen=True)
class PlanningLimits:
    """Bounds a plan must stay within, so a hostile or mistaken layout fails instead of growing
    without bound: transfer regions, segments one region lowers to, segments in all."""

    max_transfer_regions: int = 1_000_000
    max_segments_per_region: int = 1_000_000
    max_total_lowered_segments: int = 10_000_000

    def __post_init__(self):
        for name in ("max_transfer_regions", "max_segments_per_region",
                     "max_total_lowered_segments"):
            v = getattr(self, name)
            if type(v) is not int or v <= 0:
                raise ValueError(f"planning limit {name} must be a positive integer")


def _int_tuple(value, name):
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(f"transfer region {name} must contain integers")
    try:
        out = tuple(value)
    except TypeError as exc:
        raise ValueError(f"transfer region {name} must contain integers") from exc
    if any(type(v) is not int for v in out):
        raise ValueError(f"transfer region {name} must contain integers")
    return out


@dataclass(frozen=True)
class TransferRegion(Generic[_S, _T]):
    """The part of one tensor that one source fragment gives one target fragment: the overlap
    box, and how it lies in both fragments' bytes (base offsets, an inner contiguous run, and
    outer loops with their strides). Only the canonical geometry of the box is accepted."""

    tensor_id: TensorId
    source: _S
    target: _T
    overlap_offset: tuple
    overlap_shape: tuple
    source_base_offset: int
    target_base_offset: int
    inner_bytes: int
    outer_loop_counts: tuple
    source_strides: tuple
    target_strides: tuple

    def __post_init__(self):
        for name in ("overlap_offset", "overlap_shape", "outer_loop_counts", "source_strides",
                     "target_strides"):
            object.__setattr__(self, name, _int_tuple(getattr(self, name), name))
        if not self.tensor_id:
            raise ValueError("transfer region tensor_id must not be empty")
        if self.source.tensor_id != self.tensor_id or self.target.tensor_id != self.tensor_id:
            raise ValueError("transfer region tensor mismatch")
        rank = len(self.overlap_offset)
        if (rank == 0 or len(self.overlap_shape) != rank
                or len(self.source.global_offset) != rank
                or len(self.target.global_offset) != rank):
            raise ValueError("transfer region logical rank mismatch")
        if any(v < 0 for v in self.overlap_offset) or any(v <= 0 for v in self.overlap_shape):
            raise ValueError("transfer region logical box is invalid")
        for side in ("source", "target"):
            frag = getattr(self, side)
            if not box_contains(frag.global_offset, frag.local_shape, self.overlap_offset,
                                self.overlap_shape):
                raise ValueError(f"transfer region exceeds {side} logical fragment")
        for name in ("source_base_offset", "target_base_offset", "inner_bytes"):
            if type(getattr(self, name)) is not int:
                raise ValueError(f"transfer region {name} must be an integer")
        if self.source_base_offset < 0 or self.target_base_offset < 0:
            raise ValueError("transfer region base offsets must be non-negative")
        if self.inner_bytes <= 0:
            raise ValueError("transfer region inner_bytes must be positive")
        if not len(self.outer_loop_counts) == len(self.source_strides) == len(
                self.target_strides):
            raise ValueError("transfer region outer loop rank mismatch")
        if any(c <= 0 for c in self.outer_loop_counts):
            raise ValueError("transfer region outer loop counts must be positive")
        if any(s < 0 for s in self.source_strides + self.target_strides):
            raise ValueError("transfer region strides must be non-negative")
        itemsize = _fragment_itemsize(self.source)
        if _fragment_itemsize(self.target) != itemsize:
            raise ValueError("transfer region source and target itemsize differ")
        want = _derive_region_geometry(self.source, self.target, self.overlap_offset,
                                       self.overlap_shape)
        if self.total_bytes != prod(self.overlap_shape) * itemsize:
            raise ValueError("transfer region loop geometry does not match overlap")
        if self.source_base_offset != want[0]:
            raise ValueError("transfer region source base offset is inconsistent")
        if self.target_base_offset != want[1]:
            raise ValueError("transfer region target base offset is inconsistent")
        if (self.inner_bytes, self.outer_loop_counts, self.source_strides,
                self.target_strides) != want[2:]:
            raise ValueError("transfer region loop geometry is not canonical")
        _validate_outer_strides(self.outer_loop_counts, self.source_strides, self.inner_bytes,
                                "source")
        _validate_outer_strides(self.outer_loop_counts, self.target_strides, self.inner_bytes,
                                "target")
        self.validate_bounds()

    @property
    def segment_count(self) -> int:
        """How many contiguous copies the region lowers to."""
        return prod(self.outer_loop_counts)

    @property
    def total_bytes(self) -> int:
        return self.inner_bytes * self.segment_count

    @property
    def source_offset(self) -> int:
        return self.source_base_offset

    @property
    def target_offset(self) -> int:
        return self.target_base_offset

    @property
    def nbytes(self) -> int:
        return self.inner_bytes

    @property
    def repeat(self) -> int:
        return self.segment_count

    def _single_stride(self, strides, side):
        if len(strides) > 1:
            raise ValueError(f"N-D transfer region has multiple {side} strides")
        return strides[0] if strides else 0

    @property
    def source_stride(self) -> int:
        return self._single_stride(self.source_strides, "source")

    @property
    def target_stride(self) -> int:
        return self._single_stride(self.target_strides, "target")

    def validate_bounds(self) -> None:
        """ValueError when the last byte a side touches lies past that fragment's bytes."""
        for side, base, strides in (("source", self.source_base_offset, self.source_strides),
                                    ("target", self.target_base_offset, self.target_strides)):
            end = base + sum((c - 1) * s for c, s in zip(self.outer_loop_counts, strides)) \
                + self.inner_bytes
            if end > getattr(self, side).nbytes:
                raise ValueError(f"transfer region exceeds {side} fragment")

    def iter_segments(self, *, max_segments: int):
        """(source offset, target offset, nbytes) of every contiguous copy, outer loops in
        row-major order; ValueError when there are more than max_segments."""
        if type(max_segments) is not int or max_segments <= 0:
            raise ValueError("max_segments must be a positive integer")
        if self.segment_count > max_segments:
            raise ValueError(f"transfer region exceeds max_segments: {self.segment_count} > "
                             f"{max_segments}")
        counts = self.outer_loop_counts
        index = [0] * len(counts)
        while True:
            yield (self.source_base_offset + sum(i * s for i, s in
                                                 zip(index, self.source_strides)),
                   self.target_base_offset + sum(i * s for i, s in
                                                 zip(index, self.target_strides)),
                   self.inner_bytes)
            d = len(counts) - 1
            while d >= 0:
                index[d] += 1
                if index[d] < counts[d]:
                    break
                index[d] = 0
                d -= 1
            if d < 0:
                return


LogicalTransferRegion = TransferRegion[LogicalSourceFragment, LogicalTargetFragment]
LogicalTransferOperation = LogicalTransferRegion


@dataclass(frozen=True)
class PlacementExecutorPlan:
    """One participant that runs part of a plan: its placement, rank and all its fragments."""

    placement_id: PlacementId
    participant_id: ParticipantId
    rank: ParallelRank
    placement_fragment_ids: tuple

    def __post_init__(self):
        object.__setattr__(self, "placement_fragment_ids", tuple(self.placement_fragment_ids))
        if not self.placement_id or not self.participant_id or not self.placement_fragment_ids:
            raise ValueError("placement executor identifiers must not be empty")
        if len(set(self.placement_fragment_ids)) != len(self.placement_fragment_ids):
            raise ValueError("placement executor has duplicate fragment IDs")


def _executor_key(e):
    return (e.placement_id, e.participant_id, e.rank, e.placement_fragment_ids)


@dataclass(frozen=True)
class _OperationViews:
    source_indices: MappingProxyType
    target_indices: MappingProxyType
    pipeline_routes: tuple

    def operation_indices_for(self, executor, side):
        if side == "source":
            return self.source_indices.get(_executor_key(executor), ())
        if side == "target":
            return self.target_indices.get(_executor_key(executor), ())
        raise ValueError(f"invalid executor side: {side}")


def _indices_by_executor(operations, executors, side):
    out, by_fragment = {}, {}
    for e in executors:
        key = _executor_key(e)
        if key in out:
            raise ValueError("transfer plan has duplicate executor projection key")
        out[key] = []
        for fid in e.placement_fragment_ids:
            by_fragment.setdefault(fid, []).append(key)
    for i, op in enumerate(operations):
        frag = getattr(op, side)
        if isinstance(frag, PlacementFragment):
            for key in by_fragment.get(frag.placement_fragment_id, ()):
                out[key].append(i)
    return MappingProxyType({k: tuple(v) for k, v in out.items()})


def _pipeline_routes(operations):
    groups = {}
    for i, op in enumerate(operations):
        placed = isinstance(op.source, PlacementFragment)
        key = (op.source.rank.pp if placed else None,
               op.source.pipeline_stage_id if placed else None,
               op.target.rank.pp, op.target.pipeline_stage_id)
        groups.setdefault(key, []).append(i)

    def order(key):
        return tuple(-1 if v is None else v for v in key)

    return tuple(PipelineRouteGroup(*key, tuple(groups[key])) for key in sorted(groups, key=order))


def _catalog(tensors):
    return tuple(sorted(tensors, key=lambda t: t.tensor_id))


@dataclass(frozen=True)
class LogicalTransferPlan:
    """A backend-neutral plan: the operations that rebuild the target placement from one source
    (a placement or a stored manifest, never both), the executors on each side, and the limits
    it was planned under. Construction re-checks everything against the snapshots it carries:
    provenance, identities, every operation, the limits, executors, and that every selected
    target fragment is written exactly once over."""

    _operation_views: ClassVar[_OperationViews]

    resource_id: ResourceId
    revision: RevisionId
    source_placement: Optional[WeightPlacementManifest]
    target_placement: WeightPlacementManifest
    source_tensors: tuple
    target_tensors: tuple
    operations: tuple
    source_manifest: Optional[WeightManifest] = None
    planning_limits: PlanningLimits = field(default_factory=PlanningLimits)
    source_executors: tuple = ()
    target_executors: tuple = ()
    source_manifest_identity: Optional[StoredManifestIdentity] = field(init=False)

    def __post_init__(self):
        for name in ("source_tensors", "target_tensors", "operations", "source_executors",
                     "target_executors"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.resource_id or not self.revision:
            raise ValueError("logical transfer plan identifiers must not be empty")
        if not isinstance(self.target_placement, WeightPlacementManifest):
            raise ValueError("logical transfer plan target placement is invalid")
        limits = self.planning_limits
        if not isinstance(limits, PlanningLimits):
            raise ValueError("logical transfer plan planning_limits is invalid")
        if len(self.operations) > limits.max_transfer_regions:
            raise ValueError("logical transfer plan exceeds max_transfer_regions")
        if self.source_placement is not None and not isinstance(self.source_placement,
                                                                WeightPlacementManifest):
            raise ValueError("logical transfer plan source placement is invalid")
        if self.source_manifest is not None and not isinstance(self.source_manifest,
                                                               WeightManifest):
            raise ValueError("logical transfer plan source manifest is invalid")
        if (self.source_placement is None) == (self.source_manifest is None):
            raise ValueError("logical transfer plan requires exactly one source provenance")
        identity = None
        if self.source_manifest is not None:
            manifest = validate_weight_manifest_snapshot(self.source_manifest)
            object.__setattr__(self, "source_manifest", manifest)
            identity = manifest.manifest_identity
        object.__setattr__(self, "source_manifest_identity", identity)
        for side, p in (("source", self.source_placement), ("target", self.target_placement)):
            if p is not None and (p.resource_id != self.resource_id
                                  or p.revision != self.revision):
                raise ValueError(f"logical transfer plan {side} placement identity differs")
        generation = self.target_placement.weight_generation
        if self.source_placement is not None and \
                self.source_placement.weight_generation != generation:
            raise ValueError("logical transfer plan source and target weight_generation "
                             "differs")
        m = self.source_manifest
        if m is not None and (m.resource_id != self.resource_id or m.revision != self.revision
                              or m.weight_generation != generation):
            raise ValueError("logical transfer plan source manifest identity differs")
        placed_source = self.source_placement is not None
        total = 0
        for op in self.operations:
            _check_operation(op, placed_source)
            if op.segment_count > limits.max_segments_per_region:
                raise ValueError("logical transfer plan exceeds max_segments_per_region")
            total += op.segment_count
            if total > limits.max_total_lowered_segments:
                raise ValueError("logical transfer plan exceeds max_total_lowered_segments")
        if not all(isinstance(e, PlacementExecutorPlan)
                   for e in self.source_executors + self.target_executors):
            raise ValueError("logical transfer plan has invalid canonical executor metadata")
        self.validate_source_manifest_snapshot()
        object.__setattr__(self, "_operation_views", _OperationViews(
            _indices_by_executor(self.operations, self.source_executors, "source"),
            _indices_by_executor(self.operations, self.target_executors, "target"),
            _pipeline_routes(self.operations)))
        from .validation import _validate_logical_target_coverage

        _validate_logical_target_coverage(self)
        self.validate_source_placement_snapshot()

    @property
    def total_bytes(self) -> int:
        return sum(op.total_bytes for op in self.operations)

    @property
    def source_placement_id(self) -> Optional[PlacementId]:
        return None if self.source_placement is None else self.source_placement.placement_id

    @property
    def target_placement_id(self) -> PlacementId:
        return self.target_placement.placement_id

    def validate_source_manifest_snapshot(self) -> None:
        """ValueError when a stored source no longer matches what the plan was made from."""
        if self.source_manifest is None:
            if self.source_manifest_identity is not None:
                raise ValueError("logical plan has unexpected source manifest identity")
            return
        manifest = validate_weight_manifest_snapshot(self.source_manifest)
        if self.source_manifest_identity != manifest.manifest_identity:
            raise ValueError("logical plan source manifest identity differs")
        if self.source_tensors != _catalog(manifest.tensors):
            raise ValueError("logical plan source tensor catalog differs")
        by_id = {f.fragment_id: f for f in manifest.fragments}
        for op in self.operations:
            if not isinstance(op.source, StoredFragment) or \
                    by_id.get(op.source.fragment_id) != op.source:
                raise ValueError("logical plan and source manifest fragment snapshots differ")

    def validate_source_placement_snapshot(self) -> None:
        """ValueError when a placement source contradicts the plan's projections of it."""
        if self.source_placement is None:
            return
        from .validation import _validate_logical_source_placement

        _validate_logical_source_placement(self)

    @property
    def pipeline_routes(self) -> tuple:
        return self._operation_views.pipeline_routes

    def operation_indices_for_executor(self, executor: PlacementExecutorPlan,
                                       side: str) -> tuple:
        """Indices of the operations the executor takes part in on side "source" or "target"."""
        if side not in ("source", "target"):
            raise ValueError(f"invalid executor side: {side}")
        executors = self.source_executors if side == "source" else self.target_executors
        if executor not in executors:
            raise ValueError(f"{side} executor is not part of this logical plan")
        return self._operation_views.operation_indices_for(executor, side)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_operation_views"}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)
        self.__post_init__()


def _check_operation(op, placed_source):
    if not isinstance(op, TransferRegion):
        raise ValueError("logical transfer plan requires a canonical transfer operation")
    if not isinstance(op.target, PlacementFragment):
        raise ValueError("logical transfer plan target must be a placement")
    if placed_source:
        if not isinstance(op.source, PlacementFragment):
            raise ValueError("logical transfer plan source must be a placement")
    elif not isinstance(op.source, StoredFragment):
        raise ValueError("logical transfer plan source has no placement")
    op.validate_bounds()


