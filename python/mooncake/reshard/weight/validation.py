"""Checks across fragments: those of one placement part, and those only a complete placement can
make (every tensor covered once per owner and replica, split axes that own their dimensions)."""

from itertools import product

from ..geometry import boxes_exactly_cover, boxes_overlap
from .types import OwnershipAxis, ReplicatedAxis, SplitAxis, validate_fragment_geometry

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


_KINDS = ("dp", "pp", "ep", "tp")


def _kinds(tensor, axis_type):
    return tuple(a.kind for a in tensor.parallel_axes if isinstance(a, axis_type))


def _project(rank, kinds):
    """rank's coordinates on the given axes, as ((kind, value), ...)."""
    return tuple((k, getattr(rank, k)) for k in kinds)


def _matches(rank, coords):
    return all(getattr(rank, k) == v for k, v in coords)


def _validate_complete_weight_placement(tensors, fragments, *, topology):
    """ValueError unless every tensor is covered as its axes declare: for each owner (the
    ownership axes' coordinates some fragment has) every replica (the replicated axes'
    coordinates of the topology's participants with that owner) holds an exact cover of the
    tensor, spread over exactly the split axes' participants, each split rank holding one
    contiguous run of its dimension; and no active axis the tensor does not declare varies on
    its own."""
    if not tensors:
        raise ValueError("global weight placement must contain tensors")
    if not fragments:
        raise ValueError("global weight placement must contain fragments")
    of_tensor = {}
    for f in fragments:
        of_tensor.setdefault(f.tensor_id, []).append(f)
    for t in tensors:
        mine = of_tensor.get(t.tensor_id)
        if not mine:
            raise ValueError(f"global placement tensor is not fully covered: {t.tensor_id}")
        _check_undeclared_axes(t, mine, topology)
        _check_covers(t, mine, topology)


def _check_undeclared_axes(tensor, frags, topology):
    declared = [a.kind for a in tensor.parallel_axes]
    varying = tuple(k for k in declared if len({getattr(f.rank, k) for f in frags}) > 1)
    for kind in _KINDS:
        if kind in declared or getattr(topology, f"{kind}_size") == 1:
            continue
        values = {getattr(f.rank, kind) for f in frags}
        if kind in ("dp", "pp") or len(values) <= 1:
            raise ValueError("global placement tensor requires explicit parallel semantics for "
                             f"active undeclared {kind} axis: {tensor.tensor_id}")
        if not varying:
            raise ValueError(f"global placement tensor varies across undeclared {kind} axis: "
                             f"{tensor.tensor_id}")
        # An undeclared tp/ep axis may only move in lockstep with declared ones (TP and EP on
        # the same workers).
        seen = {}
        for f in frags:
            if seen.setdefault(_project(f.rank, varying), getattr(f.rank, kind)) \
                    != getattr(f.rank, kind):
                raise ValueError("global placement tensor varies independently across "
                                 f"undeclared {kind} axis: {tensor.tensor_id}")


def _check_covers(tensor, frags, topology):
    owner_kinds = _kinds(tensor, OwnershipAxis)
    replica_kinds = _kinds(tensor, ReplicatedAxis)
    whole = ((0,) * len(tensor.global_shape), tensor.global_shape)
    for owner in sorted({_project(f.rank, owner_kinds) for f in frags}):
        owned = [f for f in frags if _project(f.rank, owner_kinds) == owner]
        want = {_project(p.rank, replica_kinds) for p in topology.participants
                if _matches(p.rank, owner)}
        have = {_project(f.rank, replica_kinds) for f in owned}
        if have != want:
            raise ValueError("global placement tensor is not fully covered: missing or "
                             f"unexpected replicated-axis participant for {tensor.tensor_id}")
        for replica in sorted(want):
            cover = [f for f in owned if _project(f.rank, replica_kinds) == replica]
            if not boxes_exactly_cover(*whole, [(f.global_offset, f.local_shape)
                                               for f in cover]):
                raise ValueError(f"global placement tensor is not fully covered: "
                                 f"{tensor.tensor_id}")
            _check_split_participants(tensor, cover, topology, owner + replica)
            _check_split_geometry(tensor, cover)


def _check_split_participants(tensor, cover, topology, fixed):
    kinds = _kinds(tensor, SplitAxis)
    if not kinds:
        return
    want = {_project(p.rank, kinds) for p in topology.participants if _matches(p.rank, fixed)}
    have = {_project(f.rank, kinds) for f in cover}
    full = all({dict(c)[k] for c in want} == set(range(getattr(topology, f"{k}_size")))
               for k in kinds)
    if not full or have != want:
        raise ValueError("global placement tensor is not fully covered: missing or unexpected "
                         f"split-axis participant for {tensor.tensor_id}")


def _merged(intervals):
    out = []
    for begin, end in sorted(set(intervals)):
        if out and begin <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([begin, end])
    return out


def _check_split_geometry(tensor, cover):
    axes = [a for a in tensor.parallel_axes if isinstance(a, SplitAxis)]
    if not axes:
        return
    values = [sorted({getattr(f.rank, a.kind) for f in cover}) for a in axes]
    seen = {tuple(getattr(f.rank, a.kind) for a in axes) for f in cover}
    if seen != set(product(*values)):
        raise ValueError("non-Cartesian split-axis participant mapping cannot prove "
                         f"rank-to-dimension ownership: {tensor.tensor_id}")
    for a in axes:
        runs = {}
        for f in cover:
            begin = f.global_offset[a.dim]
            runs.setdefault(getattr(f.rank, a.kind), []).append(
                (begin, begin + f.local_shape[a.dim]))
        # Each rank's share, merged, must tile the dimension end to end with the others'.
        at = 0
        for begin, end in sorted((b, e) for r in runs.values() for b, e in _merged(r)):
            if begin != at:
                break
            at = end
        else:
            if at == tensor.global_shape[a.dim]:
                continue
        raise ValueError("split-axis rank geometry conflicts with declared dimension: "
                         f"{tensor.tensor_id}: {a.kind} -> dim {a.dim}")
