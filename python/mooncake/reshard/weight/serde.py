"""The JSON wire form of a model-weight placement: the one untyped boundary of the package.

:func:`weight_placement_to_json` writes the canonical form (sorted keys, no spaces; its SHA-256
is the placement's digest). :func:`weight_placement_from_json` reads exactly that schema: an
unknown, missing or mistyped field, a duplicate key, NaN or Infinity is a ValueError, and the
result is rebuilt through the typed constructors, so every check of theirs (and the placement
ID) applies to what arrives.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from ..contracts import ResourceKind
from ._checks import strict_json
from .part import WeightPlacementPart
from .placement import WeightPlacementManifest, _fragment_identity, _tensor_identity
from .topology import ParallelTopology, TopologyParticipant
from .types import (OwnershipAxis, ParallelRank, PlacementFragment, ReplicatedAxis, SplitAxis,
                    TensorDescriptor)

__all__ = ["weight_placement_from_json", "weight_placement_to_json"]

_TOP = {"resource_kind", "resource_id", "revision", "weight_generation", "placement_set_id",
        "placement_id", "topology", "tensors", "parts"}
_TOPOLOGY = {"tp_size", "pp_size", "ep_size", "dp_size", "topology_id", "participants"}
_TENSOR = {"tensor_id", "global_shape", "dtype", "itemsize", "shard_dims", "layout_fingerprint",
           "parallel_axes", "layer_id", "expert_id"}
_FRAGMENT = {"placement_fragment_id", "tensor_id", "global_offset", "local_shape", "nbytes",
             "rank", "aliases"}  # and pipeline_stage_id when the fragment has one
_RANK = {"dp", "tp", "pp", "ep"}


def weight_placement_to_json(placement: WeightPlacementManifest) -> str:
    """The canonical JSON of a placement."""
    if not isinstance(placement, WeightPlacementManifest):
        raise ValueError("placement must be a WeightPlacementManifest")
    t = placement.topology
    payload = {
        "resource_kind": placement.resource_kind.value,
        "resource_id": placement.resource_id,
        "revision": placement.revision,
        "weight_generation": placement.weight_generation,
        "placement_set_id": placement.placement_set_id,
        "placement_id": placement.placement_id,
        "topology": {"tp_size": t.tp_size, "pp_size": t.pp_size, "ep_size": t.ep_size,
                     "dp_size": t.dp_size, "topology_id": t.topology_id,
                     "participants": [asdict(p) for p in t.participants]},
        "tensors": [_tensor_identity(x) for x in placement.tensors],
        "parts": [{"participant_id": p.participant_id, "rank": asdict(p.rank),
                   "fragments": [_fragment_identity(f) for f in p.fragments]}
                  for p in placement.parts],
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def weight_placement_from_json(value: str) -> WeightPlacementManifest:
    """The placement a canonical JSON document describes; ValueError for anything else."""
    doc = _fields(_load(value), _TOP, "placement manifest")
    if _text(doc["resource_kind"], "resource_kind") != ResourceKind.MODEL_WEIGHT.value:
        raise ValueError("placement manifest resource_kind must be model_weight")
    topology = _topology(doc["topology"])
    tensors = [_tensor(x, i) for i, x in enumerate(_seq(doc["tensors"], "placement tensors"))]
    by_id = {t.tensor_id: t for t in tensors}
    if len(by_id) != len(tensors):
        raise ValueError("duplicate tensor_id in placement JSON")
    common = dict(resource_id=_text(doc["resource_id"], "resource_id"),
                  revision=_text(doc["revision"], "revision"),
                  weight_generation=_int(doc["weight_generation"], "weight_generation", 0),
                  placement_set_id=_text(doc["placement_set_id"], "placement_set_id"))
    parts, used = [], set()
    for i, x in enumerate(_seq(doc["parts"], "placement parts")):
        p = _fields(x, {"participant_id", "rank", "fragments"}, f"placement part {i}")
        frags = tuple(_fragment(f, j) for j, f in
                      enumerate(_seq(p["fragments"], "placement part fragments")))
        ids = {f.tensor_id for f in frags}
        if ids - set(by_id):
            raise ValueError(f"unknown tensor_id in placement part: {sorted(ids - set(by_id))[0]}")
        used |= ids
        parts.append(WeightPlacementPart(
            **common, topology_id=topology.topology_id,
            participant_id=_text(p["participant_id"], "participant_id"),
            rank=_rank(p["rank"], f"placement part rank {i}"),
            tensors=tuple(by_id[t] for t in sorted(ids)), fragments=frags))
    if set(by_id) - used:
        raise ValueError("placement JSON contains an unreferenced tensor: "
                         f"{sorted(set(by_id) - used)[0]}")
    return WeightPlacementManifest(**common, topology=topology, parts=tuple(parts),
                                   placement_id=_text(doc["placement_id"], "placement_id"))


# ---- reading -------------------------------------------------------------------------------------

def _load(value):
    return strict_json(value, "placement manifest")


def _obj(value, label):
    if not isinstance(value, Mapping) or any(type(k) is not str for k in value):
        raise ValueError(f"{label} must be a JSON object")
    return value


def _fields(value, want, label):
    value = _obj(value, label)
    if set(value) != want:
        raise ValueError(f"{label} schema fields do not match contract")
    return value


def _seq(value, label):
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise ValueError(f"{label} must be a sequence")
    return value


def _text(value, label):
    if type(value) is not str or not value:
        raise ValueError(f"{label} must be a non-empty string")
    return value


def _int(value, label, minimum):
    if type(value) is not int or value < minimum:
        raise ValueError(f"{label} must be an integer at least {minimum}")
    return value


def _opt_int(value, label, minimum):
    return None if value is None else _int(value, label, minimum)


def _ints(value, label, minimum):
    return tuple(_int(v, label, minimum) for v in _seq(value, label))


def _rank(value, label):
    r = _fields(value, _RANK, label)
    return ParallelRank(**{k: _int(r[k], f"rank {k}", 0) for k in ("dp", "tp", "pp", "ep")})


def _topology(value):
    t = _fields(value, _TOPOLOGY, "parallel topology")
    people = []
    for i, x in enumerate(_seq(t["participants"], "parallel topology participants")):
        p = _fields(x, {"participant_id", "rank"}, f"parallel topology participant {i}")
        people.append(TopologyParticipant(_text(p["participant_id"], "participant_id"),
                                          _rank(p["rank"], f"parallel topology rank {i}")))
    return ParallelTopology(**{k: _int(t[k], k, 1) for k in ("tp_size", "pp_size", "ep_size",
                                                              "dp_size")},
                            participants=tuple(people),
                            topology_id=_text(t["topology_id"], "topology_id"))


def _axis_kind(value, split=False):
    kind = _text(value, "parallel axis kind")
    if kind not in ("dp", "pp", "ep", "tp"):
        raise ValueError(f"unsupported parallel axis kind: {kind}")
    if split and kind not in ("ep", "tp"):
        raise ValueError(f"{kind} cannot use split semantics")
    return kind


def _axis(value, i):
    label = f"placement tensor parallel axis {i}"
    a = _obj(value, label)
    semantics = _text(a.get("semantics"), "axis semantics")
    if semantics == "split":
        a = _fields(a, {"semantics", "kind", "dim"}, label)
        return SplitAxis(_axis_kind(a["kind"], split=True), _int(a["dim"], "split axis dim", 0))
    if semantics in ("replicated", "ownership"):
        a = _fields(a, {"semantics", "kind"}, label)
        return (ReplicatedAxis if semantics == "replicated" else OwnershipAxis)(
            _axis_kind(a["kind"]))
    raise ValueError(f"unsupported parallel axis semantics: {semantics}")


def _tensor(value, i):
    t = _fields(value, _TENSOR, f"placement tensor {i}")
    return TensorDescriptor(
        tensor_id=_text(t["tensor_id"], "tensor_id"),
        global_shape=_ints(t["global_shape"], "global_shape", 1),
        dtype=_text(t["dtype"], "dtype"),
        itemsize=_int(t["itemsize"], "itemsize", 1),
        shard_dims=_ints(t["shard_dims"], "shard_dims", 0),
        layout_fingerprint=_text(t["layout_fingerprint"], "layout_fingerprint"),
        parallel_axes=tuple(_axis(a, j) for j, a in
                            enumerate(_seq(t["parallel_axes"], "placement tensor parallel_axes"))),
        layer_id=_opt_int(t["layer_id"], "layer_id", 0),
        expert_id=_opt_int(t["expert_id"], "expert_id", 0))


def _fragment(value, i):
    f = _obj(value, f"placement fragment {i}")
    if set(f) not in (_FRAGMENT, _FRAGMENT | {"pipeline_stage_id"}):
        raise ValueError(f"placement fragment {i} has an invalid schema")
    return PlacementFragment(
        placement_fragment_id=_text(f["placement_fragment_id"], "placement_fragment_id"),
        tensor_id=_text(f["tensor_id"], "tensor_id"),
        global_offset=_ints(f["global_offset"], "global_offset", 0),
        local_shape=_ints(f["local_shape"], "local_shape", 1),
        nbytes=_int(f["nbytes"], "nbytes", 1),
        rank=_rank(f["rank"], f"placement rank {i}"),
        pipeline_stage_id=_opt_int(f.get("pipeline_stage_id"), "pipeline_stage_id", 0),
        aliases=tuple(_text(a, "alias") for a in _seq(f["aliases"], "aliases")))
