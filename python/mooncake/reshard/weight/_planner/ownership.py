"""Which source fragments may serve a target: complete DP replicas, declared owners, and the
coverage a target must have before it is planned."""

from ...geometry import boxes_exactly_cover
from ..types import OwnershipAxis

__all__ = ["complete_dp_owned_source_owners", "complete_parallel_source_replicas",
           "has_dp_ownership", "parallel_tensor_owner"]


def _covers(tensor, fragments):
    """Whether the distinct boxes of fragments tile the whole tensor."""
    boxes = tuple({(f.global_offset, f.local_shape) for f in fragments
                   if f.tensor_id == tensor.tensor_id})
    return boxes_exactly_cover((0,) * len(tensor.global_shape), tensor.global_shape, boxes)


def parallel_tensor_owner(tensor, fragment):
    """The fragment's coordinates on the tensor's ownership axes."""
    return tuple((a.kind, getattr(fragment.rank, a.kind)) for a in tensor.parallel_axes
                 if isinstance(a, OwnershipAxis))


def has_dp_ownership(tensor):
    """Whether DP names the tensor's owner (instead of a replica of it)."""
    return any(isinstance(a, OwnershipAxis) and a.kind == "dp" for a in tensor.parallel_axes)


def _by_owner(tensor, fragments):
    out = {}
    for f in fragments:
        out.setdefault(parallel_tensor_owner(tensor, f), []).append(f)
    return out


def complete_dp_owned_source_owners(source_tensors, source_fragments):
    """For each DP-owned tensor, its one owner that holds all of it; ValueError when none does
    or when another owner holds part of it too (which one to read would be a guess)."""
    owned = [t for t in source_tensors.values() if has_dp_ownership(t)]
    if not owned:
        return {}
    per_tensor = {}
    for f in source_fragments:
        per_tensor.setdefault(f.tensor_id, []).append(f)
    out = {}
    for t in owned:
        groups = _by_owner(t, per_tensor.get(t.tensor_id, ()))
        whole = sorted(o for o, fs in groups.items() if _covers(t, fs))
        if not whole:
            raise ValueError(f"DP-owned source tensor has no complete declared owner: "
                             f"{t.tensor_id}")
        if len(whole) != 1 or len(groups) != 1:
            raise ValueError(f"DP-owned source tensor has ambiguous declared owners: "
                             f"{t.tensor_id}")
        out[t.tensor_id] = whole[0]
    return out


def complete_parallel_source_replicas(source_tensors, source_fragments):
    """The source DP ranks that hold a complete replica: every tensor that DP replicates is
    covered by each of its owners there. Maps each such rank to {tensor: owner to read} (the
    lowest owner); ValueError when no rank is complete."""
    replicated = [t for t in source_tensors.values() if not has_dp_ownership(t)]
    if not replicated:
        return {}
    per_dp = {}
    for f in source_fragments:
        per_dp.setdefault(f.rank.dp, {}).setdefault(f.tensor_id, []).append(f)
    out = {}
    for dp in sorted(per_dp):
        owners = {}
        for t in replicated:
            groups = _by_owner(t, per_dp[dp].get(t.tensor_id, ()))
            whole = [o for o, fs in groups.items() if _covers(t, fs)]
            if not groups or len(whole) != len(groups):
                break
            owners[t.tensor_id] = min(whole)
        else:
            out[dp] = owners
    if not out:
        raise ValueError("source manifests have no complete DP replica; tensors are not "
                         "fully covered")
    return out


def _validate_target_coverage(target_tensors, target_fragments):
    """Every target tensor whole for each of its owners: per DP rank for a replicated tensor,
    across ranks for a DP-owned one."""
    if not target_fragments:
        raise ValueError("target manifests have no fragments")
    per_dp = {}
    for f in target_fragments:
        per_dp.setdefault(f.rank.dp, {}).setdefault(f.tensor_id, []).append(f)
    for t in target_tensors.values():
        if has_dp_ownership(t):
            groups = _by_owner(t, [f for m in per_dp.values() for f in m.get(t.tensor_id, ())])
            if not groups or not all(_covers(t, fs) for fs in groups.values()):
                raise ValueError(f"target tensor is not fully covered by its DP owner: "
                                 f"{t.tensor_id}")
            continue
        for dp in sorted(per_dp):
            groups = _by_owner(t, per_dp[dp].get(t.tensor_id, ()))
            if not groups or not all(_covers(t, fs) for fs in groups.values()):
                raise ValueError(f"target tensor is not fully covered: {t.tensor_id}: dp={dp}")


def _validate_local_target_inventory(target_tensors, target_fragments):
    """One executor's target: some fragments, all of one rank, one at least per tensor."""
    if not target_fragments:
        raise ValueError("local target manifest has no fragments")
    if len({f.rank for f in target_fragments}) != 1:
        raise ValueError("local target manifest must describe exactly one executor")
    missing = sorted(set(target_tensors) - {f.tensor_id for f in target_fragments})
    if missing:
        raise ValueError(f"local target manifest is missing fragments: {', '.join(missing)}")
