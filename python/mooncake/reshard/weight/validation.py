"""Checks across the fragments of one placement part (the complete-placement checks are not
here yet: docs/reshard.md)."""

from ..geometry import boxes_overlap
from .types import validate_fragment_geometry

__all__ = []


def _validate_fragments(tensors, fragments, *, require_complete_alias_groups=False):
    """ValueError for a duplicate tensor or fragment ID, the same box twice for one tensor and
    rank, a fragment of an undeclared tensor or outside it, overlapping boxes of one tensor on
    one rank, and (with require_complete_alias_groups, once every part is in) an alias group
    naming an unknown tensor or declared differently by its members."""
    by_id = {}
    for t in tensors:
        if t.tensor_id in by_id:
            raise ValueError(f"duplicate tensor_id: {t.tensor_id}")
        by_id[t.tensor_id] = t
    seen_ids, seen_boxes, per_owner = set(), set(), {}
    for f in fragments:
        if f.fragment_id in seen_ids:
            raise ValueError(f"duplicate fragment_id: {f.fragment_id}")
        seen_ids.add(f.fragment_id)
        box = (f.tensor_id, f.rank, f.global_offset, f.local_shape)
        if box in seen_boxes:
            raise ValueError(f"duplicate logical fragment for tensor and parallel rank: "
                             f"{f.fragment_id}")
        seen_boxes.add(box)
        tensor = by_id.get(f.tensor_id)
        if tensor is None:
            raise ValueError(f"unknown tensor_id: {f.tensor_id}")
        validate_fragment_geometry(tensor, fragment_id=f.fragment_id,
                                   global_offset=f.global_offset, local_shape=f.local_shape,
                                   nbytes=f.nbytes)
        per_owner.setdefault((f.tensor_id, f.rank), []).append((f.global_offset, f.local_shape))
    if require_complete_alias_groups:
        _validate_alias_groups(by_id, fragments)
    for boxes in per_owner.values():
        if len(boxes) > 1 and boxes_overlap(boxes):
            raise ValueError("logical fragment boxes overlap for tensor and parallel rank")


def _validate_alias_groups(by_id, fragments):
    groups_of = {}
    for f in fragments:
        groups_of.setdefault(f.tensor_id, set()).add(f.aliases)
    for group in sorted({f.aliases for f in fragments if f.aliases}):
        unknown = sorted(set(group) - set(by_id))
        if unknown:
            raise ValueError(f"alias group references unknown tensor: {unknown[0]}")
        for member in group:
            if groups_of.get(member) != {group}:
                raise ValueError(f"alias group is not declared consistently for tensor: "
                                 f"{member}")
