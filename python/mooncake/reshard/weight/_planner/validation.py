"""Checks the planner makes of tensors, and that a plan makes of itself against the
placements it carries."""

from ...geometry import regions_exactly_cover
from ..types import PlacementFragment

__all__ = []


def _validate_tensor_compatibility(source, target):
    """A tensor can be copied only into the same layout, shape, dtype and identity."""
    if source.layout_fingerprint != target.layout_fingerprint:
        raise ValueError(f"layout mismatch for tensor {source.tensor_id}")
    for name in ("global_shape", "dtype", "itemsize", "layer_id", "expert_id"):
        if getattr(source, name) != getattr(target, name):
            raise ValueError(f"tensor descriptor mismatch: {source.tensor_id}")


def _validate_tensor_sets(source_tensors, target_tensors):
    missing = sorted(set(source_tensors) - set(target_tensors))
    if missing:
        raise ValueError(f"target manifests are missing tensors: {', '.join(missing)}")
    _validate_tensor_subset(source_tensors, target_tensors)


def _validate_tensor_subset(source_tensors, target_tensors):
    unknown = sorted(set(target_tensors) - set(source_tensors))
    if unknown:
        raise ValueError(f"target manifests contain unknown tensors: {', '.join(unknown)}")


def _owner_index(placement):
    parts = {p.participant_id: p for p in placement.parts}
    who = {f.placement_fragment_id: p.participant_id for p in placement.parts
           for f in p.fragments}
    return parts, who


def _check_executors(plan, executors, placement, side, parts, used):
    """The executors of one side: of this placement, once each, with their part's rank and
    all its fragments, each in some operation, and exactly the participants the operations
    use."""
    seen = set()
    word = "target" if side == "target" else "source"
    for e in executors:
        if e.placement_id != placement.placement_id:
            raise ValueError(f"logical {word} executor placement differs from {word}")
        if e.participant_id in seen:
            raise ValueError(f"logical plan has duplicate {word} executor participant")
        seen.add(e.participant_id)
        part = parts.get(e.participant_id)
        if part is None or e.rank != part.rank:
            raise ValueError(f"logical {word} executor differs from {word} placement")
        if e.placement_fragment_ids != tuple(sorted(f.placement_fragment_id
                                                    for f in part.fragments)):
            raise ValueError(f"logical {word} executor fragments differ from {word} placement")
        if not plan.operation_indices_for_executor(e, side):
            raise ValueError(f"logical {word} executor operations differ from {word} "
                             "placement")
    if seen != used:
        raise ValueError(f"logical {word} executors differ from planned operations")


def _placed_owner(fragment, word, parts, who):
    """The participant whose part holds an operation's source or target (``word``) fragment,
    which must be a fragment of that placement as the placement has it."""
    if not isinstance(fragment, PlacementFragment):
        raise ValueError(f"logical transfer operation {word} must be a placement")
    owner = who.get(fragment.placement_fragment_id)
    if owner is None or fragment not in parts[owner].fragments:
        raise ValueError(f"logical plan and {word} placement fragment snapshots differ")
    return owner


def _validate_logical_target_coverage(plan):
    """Every operation writes a fragment of the target placement as it is; the target
    executors match the placement; every selected fragment is covered exactly once."""
    parts, who = _owner_index(plan.target_placement)
    used, per_fragment = set(), {}
    for op in plan.operations:
        owner = _placed_owner(op.target, "target", parts, who)
        per_fragment.setdefault(op.target.placement_fragment_id, []).append(op)
        used.add(owner)
    if not plan.target_executors:
        raise ValueError("logical plan has no target executor metadata")
    _check_executors(plan, plan.target_executors, plan.target_placement, "target", parts, used)
    selected, tensors = {}, {}
    for e in plan.target_executors:
        part = parts[e.participant_id]
        selected.update({f.placement_fragment_id: f for f in part.fragments})
        for t in part.tensors:
            if tensors.setdefault(t.tensor_id, t) != t:
                raise ValueError("logical target tensor catalog differs from placement")
    if plan.target_tensors != tuple(sorted(tensors.values(), key=lambda t: t.tensor_id)):
        raise ValueError("logical target tensor catalog differs from placement")
    for fid, frag in selected.items():
        if not regions_exactly_cover(frag, per_fragment.get(fid, ())):
            raise ValueError(f"logical target fragment is not fully covered: {fid}")


def _validate_logical_source_placement(plan):
    """A placement source: its tensor catalog, every operation's source as the placement has
    it, and source executors that match the placement and the operations."""
    placement = plan.source_placement
    if placement is None:
        return
    if plan.source_tensors != placement.tensors:
        raise ValueError("logical plan source tensor catalog differs from placement")
    if not plan.source_executors:
        raise ValueError("logical plan has no source executor metadata")
    parts, who = _owner_index(placement)
    used = set()
    for op in plan.operations:
        used.add(_placed_owner(op.source, "source", parts, who))
    _check_executors(plan, plan.source_executors, placement, "source", parts, used)
