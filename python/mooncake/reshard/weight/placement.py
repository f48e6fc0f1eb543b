"""The complete logical placement of one model-weight generation and its canonical identity."""

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Optional

from ..contracts import PlacementId, PlacementSetId, ResourceId, RevisionId
from . import _checks as ck
from .part import WeightPlacementPart
from .topology import ParallelTopology
from .types import (ModelWeightResource, OwnershipAxis, PlacementFragment, ReplicatedAxis,
                    SplitAxis, TensorDescriptor)
from .validation import _validate_complete_weight_placement, _validate_fragments

__all__ = ["WeightPlacementManifest"]


@dataclass(frozen=True, init=False)
class WeightPlacementManifest(ModelWeightResource):
    """Every participant's part of one address-free placement, assembled and checked.

    Construction refuses a missing, duplicate or unknown participant, a part of another
    resource, revision, generation, placement set or topology or with a rank the topology does
    not give it, two parts that describe one tensor differently, and anything the complete
    placement checks find (validation.py). Only then are ``placement_id`` (derived from the
    content; a given one must match) and ``digest`` (SHA-256 of the canonical JSON) defined.
    ``tensors`` and ``fragments`` are the union of the parts', sorted."""

    resource_id: ResourceId
    placement_id: PlacementId
    revision: RevisionId
    weight_generation: int
    placement_set_id: PlacementSetId
    topology: ParallelTopology
    parts: tuple
    tensors: tuple
    fragments: tuple
    _digest_cache: Optional[str] = field(init=False, repr=False, compare=False)

    def __init__(self, *, resource_id: ResourceId, revision: RevisionId, weight_generation: int,
                 placement_set_id: PlacementSetId, topology: ParallelTopology, parts: tuple,
                 placement_id: Optional[PlacementId] = None) -> None:
        ck.text(resource_id, "resource_id")
        ck.text(revision, "revision")
        ck.u64(weight_generation, "weight_generation")
        ck.text(placement_set_id, "placement_set_id")
        if not isinstance(topology, ParallelTopology):
            raise ValueError("topology must be a ParallelTopology")
        if placement_id is not None:
            ck.text(placement_id, "placement_id")
        parts = tuple(sorted(ck.items_of(parts, "WeightPlacementManifest parts",
                                         WeightPlacementPart), key=lambda p: p.participant_id))
        _check_parts(parts, topology, resource_id, revision, weight_generation, placement_set_id)
        by_id: dict = {}
        frag_list: list = []
        for part in parts:
            for t in part.tensors:
                if by_id.setdefault(t.tensor_id, t) != t:
                    raise ValueError(f"placement part tensor descriptor mismatch: {t.tensor_id}")
            frag_list.extend(part.fragments)
        tensors = tuple(sorted(by_id.values(), key=lambda t: t.tensor_id))
        frags = tuple(sorted(frag_list, key=lambda f: f.placement_fragment_id))
        _validate_fragments(tensors, frags, require_complete_alias_groups=True)
        _validate_complete_weight_placement(tensors, frags, topology=topology)
        canonical = PlacementId(ck.content_id({
            "schema": "complete-weight-placement",
            "resource_id": resource_id,
            "revision": revision,
            "weight_generation": weight_generation,
            "placement_set_id": placement_set_id,
            "topology": {"tp_size": topology.tp_size, "pp_size": topology.pp_size,
                         "ep_size": topology.ep_size, "dp_size": topology.dp_size,
                         "topology_id": topology.topology_id,
                         "participants": [asdict(p) for p in topology.participants]},
            "tensors": [_tensor_identity(t) for t in tensors],
            "parts": [{"participant_id": p.participant_id, "rank": asdict(p.rank),
                       "fragments": [_fragment_identity(f) for f in p.fragments]}
                      for p in parts],
        }))
        if placement_id is not None and placement_id != canonical:
            raise ValueError("placement_id does not match canonical logical content")
        for name, value in (("resource_id", resource_id), ("placement_id", canonical),
                            ("revision", revision), ("weight_generation", weight_generation),
                            ("placement_set_id", placement_set_id), ("topology", topology),
                            ("parts", parts), ("tensors", tensors), ("fragments", frags),
                            ("_digest_cache", None)):
            object.__setattr__(self, name, value)

    @property
    def digest(self) -> str:
        """Hex SHA-256 of weight_placement_to_json(self), computed once."""
        if self._digest_cache is None:
            from .serde import weight_placement_to_json

            object.__setattr__(self, "_digest_cache", hashlib.sha256(
                weight_placement_to_json(self).encode()).hexdigest())
        assert self._digest_cache is not None  # set just above (a frozen dataclass)
        return self._digest_cache

    @classmethod
    def from_fragments(cls, *, resource_id: ResourceId, revision: RevisionId,
                       weight_generation: int, placement_set_id: PlacementSetId,
                       topology: ParallelTopology, tensors, fragments,
                       placement_id: Optional[PlacementId] = None) -> "WeightPlacementManifest":
        """The placement of a flat list of tensors and fragments, each fragment given to the
        participant with its rank (every participant gets a part, an empty one if need be)."""
        tensors = ck.items_of(tensors, "placement tensors", TensorDescriptor)
        fragments = ck.items_of(fragments, "placement fragments", PlacementFragment)
        by_id = {t.tensor_id: t for t in tensors}
        if len(by_id) != len(tensors):
            raise ValueError("duplicate tensor_id in placement tensors")
        used = {f.tensor_id for f in fragments}
        if used - set(by_id):
            raise ValueError(f"unknown tensor_id: {sorted(used - set(by_id))[0]}")
        if set(by_id) - used:
            raise ValueError("global placement contains an unreferenced tensor: "
                             f"{sorted(set(by_id) - used)[0]}")
        who = {p.rank: p.participant_id for p in topology.participants}
        held: dict = {p.participant_id: [] for p in topology.participants}
        for f in fragments:
            if f.rank not in who:
                raise ValueError(f"placement fragment rank has no topology participant: "
                                 f"{f.fragment_id}")
            held[who[f.rank]].append(f)
        parts = tuple(WeightPlacementPart(
            resource_id=resource_id, revision=revision, weight_generation=weight_generation,
            placement_set_id=placement_set_id, topology_id=topology.topology_id,
            participant_id=p.participant_id, rank=p.rank,
            tensors=tuple(by_id[i] for i in sorted({f.tensor_id for f in held[p.participant_id]})),
            fragments=tuple(held[p.participant_id])) for p in topology.participants)
        return cls(resource_id=resource_id, revision=revision,
                   weight_generation=weight_generation, placement_set_id=placement_set_id,
                   topology=topology, parts=parts, placement_id=placement_id)


def _check_parts(parts, topology, resource_id, revision, generation, placement_set_id):
    ids = [p.participant_id for p in parts]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate placement participant")
    rank_of = {p.participant_id: p.rank for p in topology.participants}
    missing = sorted(set(rank_of) - set(ids))
    if missing:
        raise ValueError(f"missing topology participant: {missing[0]}")
    unknown = sorted(set(ids) - set(rank_of))
    if unknown:
        raise ValueError(f"unknown topology participant: {unknown[0]}")
    for p in parts:
        for name, want in (("resource_id", resource_id), ("revision", revision),
                           ("weight_generation", generation),
                           ("placement_set_id", placement_set_id),
                           ("topology_id", topology.topology_id)):
            if getattr(p, name) != want:
                raise ValueError(f"placement part {name} differs")
        if p.rank != rank_of[p.participant_id]:
            raise ValueError("placement part rank differs from topology")


def axis_identity(axis):
    """An axis as the wire form and the placement identity write it."""
    if isinstance(axis, SplitAxis):
        return {"semantics": "split", "kind": axis.kind, "dim": axis.dim}
    if isinstance(axis, ReplicatedAxis):
        return {"semantics": "replicated", "kind": axis.kind}
    if isinstance(axis, OwnershipAxis):
        return {"semantics": "ownership", "kind": axis.kind}
    raise ValueError("unsupported parallel axis value")


def _tensor_identity(t):
    return {"tensor_id": t.tensor_id, "global_shape": list(t.global_shape), "dtype": t.dtype,
            "itemsize": t.itemsize, "shard_dims": list(t.shard_dims),
            "layout_fingerprint": t.layout_fingerprint,
            "parallel_axes": [axis_identity(a) for a in t.parallel_axes],
            "layer_id": t.layer_id, "expert_id": t.expert_id}


def _fragment_identity(f):
    out = {"placement_fragment_id": f.placement_fragment_id, "tensor_id": f.tensor_id,
           "global_offset": list(f.global_offset), "local_shape": list(f.local_shape),
           "nbytes": f.nbytes, "rank": asdict(f.rank), "aliases": list(f.aliases)}
    # A stage is part of the identity only when one is given, so placements without stages
    # keep the IDs they had before stages existed.
    if f.pipeline_stage_id is not None:
        out["pipeline_stage_id"] = f.pipeline_stage_id
    return out
