"""Checks between a logical placement and the runtime bindings of it."""

from ..contracts import validate_resource_binding_identity
from . import _checks as ck
from .placement import WeightPlacementManifest
from .runtime import WeightRuntimeBindingManifest
from .types import canonical_strides_bytes

__all__ = ["validate_runtime_binding", "validate_runtime_bindings"]


def validate_runtime_binding(placement: WeightPlacementManifest,
                             binding: WeightRuntimeBindingManifest) -> None:
    """ValueError unless binding holds exactly its participant's fragments of this placement:
    the same identity (kind, resource, placement ID, digest, revision), one runtime fragment per
    logical one with its byte size, shape and item size, a dense row-major view, and no two
    fragments on one worker and device overlapping (in their views or their allocations) except
    members of one declared alias group at the same address."""
    if not isinstance(placement, WeightPlacementManifest):
        raise ValueError("placement must be a WeightPlacementManifest")
    if not isinstance(binding, WeightRuntimeBindingManifest):
        raise ValueError("binding must be a WeightRuntimeBindingManifest")
    validate_resource_binding_identity(placement, binding)
    if placement.revision != binding.revision:
        raise ValueError("placement and runtime binding revision differ")
    part = next((p for p in placement.parts if p.participant_id == binding.participant_id), None)
    if part is None:
        raise ValueError(f"unknown runtime binding participant: {binding.participant_id}")
    logical = {f.placement_fragment_id: f for f in part.fragments}
    bound = {f.placement_fragment_id: f for f in binding.fragments}
    if set(bound) - set(logical):
        raise ValueError("unknown placement fragment in runtime binding: "
                         f"{sorted(set(bound) - set(logical))[0]}")
    if set(logical) - set(bound):
        raise ValueError("missing placement fragment in runtime binding: "
                         f"{sorted(set(logical) - set(bound))[0]}")
    tensors = {t.tensor_id: t for t in placement.tensors}
    for fid, lf in logical.items():
        rf, t = bound[fid], tensors[lf.tensor_id]
        for what, got, want in (("byte size", rf.nbytes, lf.nbytes),
                                ("local_shape", rf.local_shape, lf.local_shape),
                                ("itemsize", rf.itemsize, t.itemsize)):
            if got != want:
                raise ValueError(f"runtime binding {what} does not match placement: {fid}")
        if rf.strides_bytes != canonical_strides_bytes(lf.local_shape, t.itemsize):
            raise ValueError("runtime binding stride does not describe a canonical contiguous "
                             f"view: {fid}")
    _check_address_ranges(binding.instance_id, tensors, part.fragments, binding.fragments)


def validate_runtime_bindings(placement: WeightPlacementManifest, bindings) -> None:
    """ValueError unless bindings is exactly one valid binding per participant that holds
    fragments, and the bindings of one runtime instance do not overlap one another either."""
    items = ck.items_of(bindings, "runtime bindings", WeightRuntimeBindingManifest)
    who = [b.participant_id for b in items]
    if len(set(who)) != len(who):
        raise ValueError("duplicate runtime binding participant")
    for b in items:
        validate_runtime_binding(placement, b)
    parts = {p.participant_id: p for p in placement.parts}
    per_instance: dict = {}
    for b in items:
        per_instance.setdefault(b.instance_id, []).append(b)
    tensors = {t.tensor_id: t for t in placement.tensors}
    for instance, group in per_instance.items():
        _check_address_ranges(instance, tensors,
                              [f for b in group for f in parts[b.participant_id].fragments],
                              [f for b in group for f in b.fragments])
    want = {p.participant_id for p in placement.parts if p.fragments}
    have = set(who)
    if want - have:
        raise ValueError(f"missing runtime binding participant: {sorted(want - have)[0]}")
    if have - want:
        raise ValueError(f"unknown runtime binding participant: {sorted(have - want)[0]}")


def _alias_key(t):
    return (t.global_shape, t.dtype, t.itemsize, t.shard_dims, t.parallel_axes, t.layer_id,
            t.expert_id, t.layout_fingerprint)


def _declared_alias(a, ra, b, rb, tensors):
    """Whether two bound fragments are one storage shared by a declared alias group."""
    return (ra.address == rb.address and ra.nbytes == rb.nbytes and len(a.aliases) >= 2
            and a.aliases == b.aliases and a.tensor_id in a.aliases and b.tensor_id in a.aliases
            and a.global_offset == b.global_offset and a.local_shape == b.local_shape
            and _alias_key(tensors[a.tensor_id]) == _alias_key(tensors[b.tensor_id]))


def _check_address_ranges(instance, tensors, logical, bound):
    by_id = {f.placement_fragment_id: f for f in logical}
    spaces = {}
    for rf in bound:
        spaces.setdefault((instance, rf.worker_id, rf.device), []).append(
            (by_id[rf.placement_fragment_id], rf))
    for space, pairs in spaces.items():
        live = []
        for lf, rf in sorted(pairs, key=lambda p: p[1].address):
            live = [(a, ra) for a, ra in live if ra.address + ra.nbytes > rf.address]
            for a, ra in live:
                if not _declared_alias(a, ra, lf, rf, tensors):
                    raise ValueError(f"runtime binding address ranges overlap: {ra.fragment_id} "
                                     f"and {rf.fragment_id} in {space}")
            live.append((lf, rf))
        live = []
        for rf in sorted((rf for _, rf in pairs), key=lambda r: r.storage_address):
            live = [r for r in live if r.storage_address + r.storage_nbytes > rf.storage_address]
            for r in live:
                if (r.storage_address, r.storage_nbytes) != (rf.storage_address,
                                                              rf.storage_nbytes):
                    raise ValueError("runtime binding storage allocation ranges overlap: "
                                     f"{r.fragment_id} and {rf.fragment_id} in {space}")
            live.append(rf)
