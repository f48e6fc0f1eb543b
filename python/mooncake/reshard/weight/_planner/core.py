"""The planning itself: for every target fragment, the source boxes that meet it (from one
complete source replica or the declared owner), their overlaps, and the transfer regions."""

from dataclasses import dataclass

from ...geometry import boxes_exactly_cover
from ..placement import WeightPlacementManifest
from ..storage_manifest import StoredFragment
from ..types import PlacementFragment
from . import geometry
from .contracts import LogicalTransferPlan, PlacementExecutorPlan, PlanningLimits
from .ownership import (_validate_local_target_inventory, _validate_target_coverage,
                        complete_dp_owned_source_owners, complete_parallel_source_replicas,
                        has_dp_ownership, parallel_tensor_owner)
from .validation import _validate_tensor_compatibility, _validate_tensor_sets, \
    _validate_tensor_subset


@dataclass(frozen=True)
class _PlannedTransfer:
    resource_id: str
    revision: str
    operations: tuple
    planning_limits: PlanningLimits


def _collect_placements(manifests, label):
    """({tensor_id: descriptor}, [fragments]) of exactly one complete placement."""
    if not manifests:
        raise ValueError(f"{label} placement manifests must not be empty")
    if len(manifests) != 1:
        raise ValueError(f"{label} requires one complete WeightPlacementManifest")
    if not all(isinstance(m, WeightPlacementManifest) for m in manifests):
        raise ValueError(f"{label} placement manifests must be WeightPlacementManifest")
    m = manifests[0]
    return {t.tensor_id: t for t in m.tensors}, list(m.fragments)


def _executors(placement, operations, side, participant_ids=None):
    """An executor for each participant of placement (of participant_ids, if given) that holds
    fragments some operation uses on this side, ordered by rank (dp, pp, ep, tp)."""
    if side not in ("source", "target"):
        raise ValueError(f"invalid placement executor side: {side}")
    used = set()
    for op in operations:
        frag = getattr(op, side)
        if not isinstance(frag, PlacementFragment):
            raise ValueError(f"placement executor operation {side} is not a placement")
        used.add(frag.placement_fragment_id)
    out, ranks = [], set()
    for part in placement.parts:
        if participant_ids is not None and part.participant_id not in participant_ids:
            continue
        if not part.fragments:
            continue
        if part.rank in ranks:
            raise ValueError(f"duplicate {side} placement executor rank: {part.rank}")
        ranks.add(part.rank)
        ids = tuple(sorted(f.placement_fragment_id for f in part.fragments))
        if used.isdisjoint(ids):
            continue
        out.append(PlacementExecutorPlan(placement.placement_id, part.participant_id, part.rank,
                                         ids))
    out.sort(key=lambda e: (e.rank.dp, e.rank.pp, e.rank.ep, e.rank.tp))
    return tuple(out)


def _plan_transfer(resource_id, revision, source_tensors, source_fragments, target_tensors,
                   target_fragments, *, local_target=False, planning_limits=None):
    limits = planning_limits or PlanningLimits()
    if local_target:
        _validate_tensor_subset(source_tensors, target_tensors)
        _validate_local_target_inventory(target_tensors, target_fragments)
    else:
        _validate_tensor_sets(source_tensors, target_tensors)
        _validate_target_coverage(target_tensors, target_fragments)
    placed = tuple(f for f in source_fragments if isinstance(f, PlacementFragment))
    stored = tuple(f for f in source_fragments if isinstance(f, StoredFragment))
    if not source_fragments or len(placed) + len(stored) != len(source_fragments) or \
            (placed and stored):
        raise ValueError("source fragments mix placement and stored locations")
    replicas = complete_parallel_source_replicas(source_tensors, placed) if placed else {}
    dp_owners = complete_dp_owned_source_owners(source_tensors, placed) if placed else {}
    # Target DP replicas read the complete source replicas in turn.
    source_dps = sorted(replicas)
    dp_for = ({dp: source_dps[dp % len(source_dps)] for dp in {f.rank.dp
                                                              for f in target_fragments}}
              if placed and source_dps else {})
    groups = {}
    for f in source_fragments:
        groups.setdefault(f.tensor_id, {}).setdefault(geometry._geometry_key(f), []).append(f)
    index = {}
    for tensor_id, by_box in groups.items():
        for g in by_box.values():
            g.sort(key=geometry._source_sort_key)
        index[tensor_id] = geometry._CandidateBoxIndex.build(tuple(tuple(g)
                                                                   for g in by_box.values()))

    operations, segments = [], 0
    for target in sorted(target_fragments, key=lambda f: f.fragment_id):
        t_desc = target_tensors[target.tensor_id]
        s_desc = source_tensors.get(target.tensor_id)
        if s_desc is None:
            raise ValueError(f"missing source tensor: {target.tensor_id}")
        _validate_tensor_compatibility(s_desc, t_desc)
        overlaps = []
        found = index.get(target.tensor_id)
        for group in (found.query(target) if found is not None else ()):
            if placed:
                if has_dp_ownership(s_desc):
                    owner, dp = dp_owners[target.tensor_id], None
                else:
                    dp = dp_for[target.rank.dp]
                    owner = replicas[dp][target.tensor_id]
                chosen = next((f for f in group
                               if (dp is None or f.rank.dp == dp)
                               and parallel_tensor_owner(s_desc, f) == owner), None)
                if chosen is None:
                    continue
            else:
                chosen = group[0]
            box = geometry._overlap_box(chosen, target)
            if box is None:
                continue
            if len(operations) + len(overlaps) + 1 > limits.max_transfer_regions:
                raise ValueError("logical transfer plan exceeds max_transfer_regions: "
                                 f"{limits.max_transfer_regions}")
            overlaps.append((*box, chosen))
        overlaps.sort(key=lambda o: (o[0], o[1], o[2].fragment_id))
        if not boxes_exactly_cover(target.global_offset, target.local_shape,
                                   tuple((o, s) for o, s, _ in overlaps)):
            raise ValueError(f"target fragment is not fully covered: {target.fragment_id}")
        for offset, shape, source in overlaps:
            region = geometry._transfer_region(t_desc, source, target, offset, shape)
            if region.segment_count > limits.max_segments_per_region:
                raise ValueError("logical transfer region exceeds max_segments_per_region: "
                                 f"{region.segment_count} > {limits.max_segments_per_region}")
            if segments + region.segment_count > limits.max_total_lowered_segments:
                raise ValueError("logical transfer plan exceeds max_total_lowered_segments: "
                                 f"{segments + region.segment_count} > "
                                 f"{limits.max_total_lowered_segments}")
            segments += region.segment_count
            operations.append(region)
    operations.sort(key=lambda r: (r.target.fragment_id, r.target_base_offset,
                                   r.source.fragment_id, r.source_base_offset))
    return _PlannedTransfer(resource_id, revision, tuple(operations), limits)


def _logical_transfer_plan(transfer, *, source_tensors, target_tensors, source_placement,
                           source_manifest, target_placement, source_participant_ids=None,
                           target_participant_ids=None):
    ops = transfer.operations
    return LogicalTransferPlan(
        resource_id=transfer.resource_id, revision=transfer.revision,
        source_placement=source_placement, target_placement=target_placement,
        source_tensors=tuple(sorted(source_tensors.values(), key=lambda t: t.tensor_id)),
        target_tensors=tuple(sorted(target_tensors.values(), key=lambda t: t.tensor_id)),
        operations=ops, source_manifest=source_manifest,
        planning_limits=transfer.planning_limits,
        source_executors=(_executors(source_placement, ops, "source", source_participant_ids)
                          if source_placement is not None else ()),
        target_executors=_executors(target_placement, ops, "target", target_participant_ids))
