"""mooncake.reshard.weight: ranks, axes, tensor descriptors, placement fragments, the topology,
placement parts, the complete placement and its wire form, runtime bindings: canonical IDs and
every refusal."""

import hashlib
import json
from dataclasses import replace

import pytest

from mooncake.reshard import weight
from mooncake.reshard.contracts import ResourceKind, RuntimeBindingFragment
from mooncake.reshard.weight import (StoredFragment, WeightManifest, WeightPlacementManifest,
                                     WeightRuntimeBindingManifest, validate_runtime_binding,
                                     validate_runtime_bindings, weight_placement_from_json,
                                     weight_placement_to_json)
from mooncake.reshard.weight.storage_manifest import (StoredManifestIdentity,
                                                      validate_weight_manifest_snapshot)
from mooncake.reshard.weight import (OwnershipAxis, ParallelRank, ParallelTopology,
                                     PlacementFragment, ReplicatedAxis, SplitAxis,
                                     TensorDescriptor, TopologyParticipant, WeightPlacementPart)
from mooncake.reshard.weight.types import canonical_strides_bytes, validate_fragment_geometry


def desc(tensor_id="w", shape=(8, 4), axes=(SplitAxis("tp", 0),), shard_dims=(0,), **kw):
    return TensorDescriptor(tensor_id, shape, "bfloat16", 2, shard_dims, "row-major", axes, **kw)


def test_surface():
    assert weight.RuntimeBindingFragment is RuntimeBindingFragment
    for name in weight.__all__:
        assert hasattr(weight, name)


def test_rank_and_axes():
    assert ParallelRank() == ParallelRank(0, 0, 0, 0)
    with pytest.raises(ValueError, match="parallel rank tp must be at least 0"):
        ParallelRank(tp=-1)
    with pytest.raises(ValueError, match="parallel rank dp must be an integer"):
        ParallelRank(dp=True)
    with pytest.raises(ValueError, match="cannot use split semantics"):
        SplitAxis("dp", 0)
    with pytest.raises(ValueError, match="leading logical expert dimension"):
        SplitAxis("ep", 1)
    with pytest.raises(ValueError, match="unsupported parallel axis kind: sp"):
        ReplicatedAxis("sp")
    with pytest.raises(ValueError, match="parallel axis kind must be a non-empty string"):
        OwnershipAxis("")


def test_descriptor_orders_axes_and_checks_shard_dims():
    d = desc(shape=(8, 16, 32), shard_dims=[0, 2],
             axes=[SplitAxis("tp", 2), SplitAxis("ep", 0), OwnershipAxis("pp"),
                   ReplicatedAxis("dp")])
    assert [a.kind for a in d.parallel_axes] == ["dp", "pp", "ep", "tp"]
    assert d.shard_dims == (0, 2) and d.global_shape == (8, 16, 32)


@pytest.mark.parametrize("kw,msg", [
    (dict(shape=()), "global_shape must not be empty"),
    (dict(shape=(8, 0)), "global_shape must be at least 1"),
    (dict(shape="ab"), "global_shape must contain integers"),
    (dict(tensor_id=""), "tensor_id must be a non-empty string"),
    (dict(shard_dims=(0, 0)), "must not contain duplicates"),
    (dict(shard_dims=(1, 0), axes=(SplitAxis("tp", 0), SplitAxis("ep", 0))), "sorted"),
    (dict(shard_dims=(2,), axes=(SplitAxis("tp", 2),)), "out-of-range"),
    (dict(axes=(SplitAxis("tp", 1),)), "conflict with shard_dims"),
    (dict(axes=(SplitAxis("tp", 0), ReplicatedAxis("tp"))), "duplicate kinds"),
    (dict(axes=(SplitAxis("tp", 0), SplitAxis("ep", 0))), "share a dimension"),
    (dict(axes=("tp",)), "explicit axis values"),
    (dict(axes=SplitAxis("tp", 0)), "must be a sequence"),
    (dict(axes=(SplitAxis("ep", 0),), expert_id=3), "individually allocated expert"),
    (dict(layer_id=-1), "layer_id must be at least 0"),
])
def test_descriptor_rejects(kw, msg):
    with pytest.raises(ValueError, match=msg):
        desc(**kw)


def test_fragment_ids_are_canonical_and_match_the_reference():
    r = ParallelRank(tp=1)
    f = PlacementFragment("w", (4, 0), (4, 4), 32, r)
    # The same content hashed by the reference's implementation (checked against it once).
    assert f.fragment_id == ("sha256:1db33c24710870b45a6385b1ff8373e3ad23e73ec3496a6a43675d5eeca848dc")
    g = PlacementFragment("w", [4, 0], [4, 4], 32, r, pipeline_stage_id=2, aliases=("w", "v"))
    assert g.aliases == ("v", "w")
    assert g.placement_fragment_id == (
        "sha256:37c3fc36ba777330bfa4ca9661585b656a316ed5b21b9c699d7a1ac127c69887")
    assert PlacementFragment("w", (4, 0), (4, 4), 32, r, placement_fragment_id="mine").fragment_id \
        == "mine"
    assert f == PlacementFragment("w", (4, 0), (4, 4), 32, ParallelRank(tp=1))


@pytest.mark.parametrize("kw,msg", [
    (dict(global_offset=(-1, 0)), "global_offset must be at least 0"),
    (dict(local_shape=(0, 4)), "local_shape must be at least 1"),
    (dict(nbytes=0), "nbytes must be at least 1"),
    (dict(nbytes=1 << 64), "unsigned 64-bit"),
    (dict(rank=(0, 1)), "rank must be a ParallelRank"),
    (dict(pipeline_stage_id=-2), "pipeline_stage_id must be at least 0"),
    (dict(aliases=("w",)), "at least two tensor IDs"),
    (dict(aliases=("a", "b")), "must contain the fragment tensor_id"),
    (dict(aliases=("w", "w")), "must not contain duplicates"),
    (dict(aliases=("w", 3)), "non-empty strings"),
    (dict(placement_fragment_id=""), "placement_fragment_id must be a non-empty string"),
])
def test_fragment_rejects(kw, msg):
    args = dict(tensor_id="w", global_offset=(0, 0), local_shape=(4, 4), nbytes=32,
                rank=ParallelRank())
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        PlacementFragment(**args)


def test_fragment_geometry():
    d = desc()
    validate_fragment_geometry(d, fragment_id="f", global_offset=(4, 0), local_shape=(4, 4),
                               nbytes=32)
    with pytest.raises(ValueError, match="rank mismatch: f"):
        validate_fragment_geometry(d, fragment_id="f", global_offset=(0,), local_shape=(4,),
                                   nbytes=8)
    with pytest.raises(ValueError, match="out of bounds: f"):
        validate_fragment_geometry(d, fragment_id="f", global_offset=(5, 0), local_shape=(4, 4),
                                   nbytes=32)
    with pytest.raises(ValueError, match="expected 32, got 31"):
        validate_fragment_geometry(d, fragment_id="f", global_offset=(4, 0), local_shape=(4, 4),
                                   nbytes=31)
    assert canonical_strides_bytes((2, 3, 4), 2) == (24, 8, 2)


def _topology(**kw):
    args = dict(tp_size=2, pp_size=1, ep_size=1, dp_size=1,
                participants=(TopologyParticipant("b", ParallelRank(tp=1)),
                              TopologyParticipant("a", ParallelRank())))
    args.update(kw)
    return ParallelTopology(**args)


def test_topology():
    t = _topology()
    assert [p.participant_id for p in t.participants] == ["a", "b"]
    assert t.world_size == 2
    assert t.topology_id == (
        "sha256:680989f6f7f83e7363b6f80d61a6331ff24bf06d0ecb6facdbf0ad08fb9d91af")
    assert _topology(topology_id=t.topology_id) == t
    assert t.participant("b").rank == ParallelRank(tp=1)
    with pytest.raises(ValueError, match="unknown topology participant: c"):
        t.participant("c")
    # world_size counts participants, not the product of the sizes.
    assert _topology(dp_size=4).world_size == 2


@pytest.mark.parametrize("kw,msg", [
    (dict(tp_size=0), "tp_size must be at least 1"),
    (dict(participants=()), "must not be empty"),
    (dict(participants=("a",)), "must contain TopologyParticipant"),
    (dict(participants=(TopologyParticipant("a", ParallelRank()),) * 2), "duplicate topology "
                                                                          "participant_id"),
    (dict(participants=(TopologyParticipant("a", ParallelRank()),
                        TopologyParticipant("b", ParallelRank()))), "duplicate topology parallel"),
    (dict(participants=(TopologyParticipant("a", ParallelRank(tp=2)),)), "tp rank is out of range"),
    (dict(topology_id="sha256:00"), "does not match canonical topology"),
])
def test_topology_rejects(kw, msg):
    with pytest.raises(ValueError, match=msg):
        _topology(**kw)
    with pytest.raises(ValueError, match="participant_id must be a non-empty string"):
        TopologyParticipant("", ParallelRank())


def _part(tensors=None, fragments=None, rank=ParallelRank(), **kw):
    d = desc()
    args = dict(resource_id="model", revision="r1", weight_generation=3, placement_set_id="ps",
                topology_id="t", participant_id="a", rank=rank,
                tensors=(d,) if tensors is None else tensors,
                fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, rank),)
                if fragments is None else fragments)
    args.update(kw)
    return WeightPlacementPart(**args)


def test_part_sorts_and_accepts():
    r = ParallelRank()
    a, b = desc("b"), desc("a")
    frags = (PlacementFragment("b", (0, 0), (4, 4), 32, r),
             PlacementFragment("a", (0, 0), (2, 4), 16, r),
             PlacementFragment("a", (2, 0), (2, 4), 16, r))
    p = _part(tensors=(a, b), fragments=frags)
    assert [t.tensor_id for t in p.tensors] == ["a", "b"]
    assert [f.fragment_id for f in p.fragments] == sorted(f.fragment_id for f in frags)
    assert p == _part(tensors=(b, a), fragments=frags[::-1])
    empty = _part(tensors=(), fragments=())
    assert empty.tensors == () and empty.fragments == ()


def test_part_rejects():
    r = ParallelRank()
    cases = [
        (dict(resource_id=""), "resource_id must be a non-empty string"),
        (dict(weight_generation=-1), "weight_generation must be at least 0"),
        (dict(rank="0", tensors=(), fragments=()), "placement part rank must be a ParallelRank"),
        (dict(tensors=("w",)), "must contain TensorDescriptor"),
        (dict(fragments=[PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank(tp=1))]),
         "fragment rank differs from part rank"),
        (dict(tensors=(desc(), desc("x"))), "unreferenced tensor: x"),
        (dict(tensors=(desc(), desc())), "duplicate tensor_id: w"),
        (dict(tensors=(), fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, r),)),
         "unknown tensor_id: w"),
        (dict(fragments=(PlacementFragment("w", (6, 0), (4, 4), 32, r),)), "out of bounds"),
        (dict(fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, r),) * 2),
         "duplicate fragment_id"),
        (dict(fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, r),
                         PlacementFragment("w", (0, 0), (4, 4), 32, r,
                                           placement_fragment_id="other"))),
         "duplicate logical fragment"),
        (dict(fragments=(PlacementFragment("w", (0, 0), (4, 4), 32, r),
                         PlacementFragment("w", (2, 0), (4, 4), 32, r))),
         "boxes overlap for tensor and parallel rank"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _part(**kw)


def test_alias_groups_checked_once_complete():
    from mooncake.reshard.weight.validation import _validate_fragments

    r = ParallelRank()
    a, b = desc("a"), desc("b")
    fa = PlacementFragment("a", (0, 0), (8, 4), 64, r, aliases=("a", "b"))
    fb = PlacementFragment("b", (0, 0), (8, 4), 64, r, aliases=("a", "b"))
    _validate_fragments((a, b), (fa, fb), require_complete_alias_groups=True)
    # A part may name a member another participant holds; the complete check refuses it.
    _validate_fragments((a,), (fa,))
    with pytest.raises(ValueError, match="alias group references unknown tensor: b"):
        _validate_fragments((a,), (fa,), require_complete_alias_groups=True)
    fb_alone = PlacementFragment("b", (0, 0), (8, 4), 64, r)
    with pytest.raises(ValueError, match="not declared consistently for tensor: b"):
        _validate_fragments((a, b), (fa, fb_alone), require_complete_alias_groups=True)


# ---- the complete placement, its wire form, runtime bindings --------------------------------------

TP2 = (TopologyParticipant("w0", ParallelRank(tp=0)), TopologyParticipant("w1", ParallelRank(tp=1)))


def tp2_placement(**kw):
    """A (8, 4) tensor split in two rows blocks over TP=2, one block per worker."""
    t = ParallelTopology(tp_size=2, pp_size=1, ep_size=1, dp_size=1, participants=TP2)
    d = desc()
    frags = [PlacementFragment("w", (4 * r, 0), (4, 4), 32, ParallelRank(tp=r)) for r in (0, 1)]
    args = dict(resource_id="model", revision="r1", weight_generation=1, placement_set_id="ps",
                topology=t, tensors=[d], fragments=frags)
    args.update(kw)
    return WeightPlacementManifest.from_fragments(**args)


def test_placement_assembles_and_identifies():
    p = tp2_placement()
    assert p.resource_kind is ResourceKind.MODEL_WEIGHT
    assert [x.participant_id for x in p.parts] == ["w0", "w1"]
    assert len(p.fragments) == 2 and p.tensors == (desc(),)
    assert p.placement_id.startswith("sha256:") and len(p.digest) == 64
    assert p == tp2_placement() and p.placement_id == tp2_placement().placement_id
    assert tp2_placement(revision="r2").placement_id != p.placement_id
    # The same parts handed in directly, in another order, make the same placement.
    q = WeightPlacementManifest(resource_id="model", revision="r1", weight_generation=1,
                                placement_set_id="ps", topology=p.topology, parts=p.parts[::-1],
                                placement_id=p.placement_id)
    assert q == p and q.digest == p.digest
    with pytest.raises(ValueError, match="placement_id does not match"):
        WeightPlacementManifest(resource_id="model", revision="r1", weight_generation=1,
                                placement_set_id="ps", topology=p.topology, parts=p.parts,
                                placement_id="sha256:x")


def test_placement_refuses_incomplete_or_inconsistent_parts():
    p = tp2_placement()
    base = dict(resource_id="model", revision="r1", weight_generation=1, placement_set_id="ps",
                topology=p.topology)
    with pytest.raises(ValueError, match="missing topology participant: w1"):
        WeightPlacementManifest(**base, parts=p.parts[:1])
    with pytest.raises(ValueError, match="duplicate placement participant"):
        WeightPlacementManifest(**base, parts=p.parts + p.parts[:1])
    with pytest.raises(ValueError, match="placement part revision differs"):
        WeightPlacementManifest(**dict(base, revision="r9"), parts=p.parts)
    # Half the tensor missing: a rank's fragment gone leaves the tensor uncovered.
    with pytest.raises(ValueError, match="not fully covered"):
        tp2_placement(fragments=[PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank())])
    # Both ranks holding the same rows: the split axis does not own its dimension.
    with pytest.raises(ValueError, match="not fully covered"):
        tp2_placement(fragments=[PlacementFragment("w", (0, 0), (4, 4), 32, ParallelRank(tp=r))
                                 for r in (0, 1)])
    with pytest.raises(ValueError, match="rank has no topology participant"):
        tp2_placement(fragments=[PlacementFragment("w", (0, 0), (8, 4), 64, ParallelRank(tp=5))])
    # A replicated tensor must be whole on every rank.
    rep = desc(axes=(ReplicatedAxis("tp"),), shard_dims=())
    whole = [PlacementFragment("w", (0, 0), (8, 4), 64, ParallelRank(tp=r)) for r in (0, 1)]
    assert tp2_placement(tensors=[rep], fragments=whole).tensors == (rep,)
    with pytest.raises(ValueError, match="replicated-axis participant"):
        tp2_placement(tensors=[rep], fragments=whole[:1])
    # An active axis the tensor does not declare.
    bare = desc(axes=(), shard_dims=())
    with pytest.raises(ValueError, match="varies across undeclared tp axis"):
        tp2_placement(tensors=[bare], fragments=whole)
    with pytest.raises(ValueError, match="explicit parallel semantics for active undeclared tp"):
        tp2_placement(tensors=[bare], fragments=[
            PlacementFragment("w", (0, 0), (8, 4), 64, ParallelRank())])


def test_wire_form_round_trips_and_is_strict():
    p = tp2_placement()
    text = weight_placement_to_json(p)
    assert json.loads(text)["resource_kind"] == "model_weight"
    assert weight_placement_from_json(text) == p
    assert p.digest == hashlib.sha256(text.encode()).hexdigest()
    doc = json.loads(text)
    bad = [
        ({**doc, "extra": 1}, "schema fields do not match"),
        ({**doc, "resource_kind": "kv_cache"}, "resource_kind must be model_weight"),
        ({**doc, "weight_generation": True}, "weight_generation must be an integer"),
        ({**doc, "placement_id": "sha256:" + "0" * 64}, "placement_id does not match"),
        ({**doc, "tensors": []}, "unknown tensor_id in placement part"),
    ]
    for d, msg in bad:
        with pytest.raises(ValueError, match=msg):
            weight_placement_from_json(json.dumps(d))
    for raw, msg in (("{", "not valid JSON"), ("[]", "must be a JSON object"),
                     ('{"a": NaN}', "non-finite"), ('{"a": 1, "a": 2}', "duplicate JSON field"),
                     (None, "not valid JSON")):
        with pytest.raises(ValueError, match=msg):
            weight_placement_from_json(raw)
    with pytest.raises(ValueError, match="must be a WeightPlacementManifest"):
        weight_placement_to_json(doc)


def _binding(p, participant="w0", base=0x10000, **kw):
    part = next(x for x in p.parts if x.participant_id == participant)
    frags = tuple(RuntimeBindingFragment(
        placement_fragment_id=f.placement_fragment_id, fragment_id=f"rt-{participant}-{i}",
        address=base + 4096 * i, nbytes=f.nbytes, worker_id=participant, endpoint="e",
        device="cuda:0", itemsize=2, local_shape=f.local_shape, strides_bytes=(8, 2),
        storage_address=base + 4096 * i, storage_nbytes=4096, storage_offset_bytes=0)
        for i, f in enumerate(part.fragments))
    args = dict(resource_id="model", placement_id=p.placement_id, placement_digest=p.digest,
                instance_id="inst", generation=1, lease_id="lease", revision="r1",
                participant_id=participant, fragments=frags)
    args.update(kw)
    return WeightRuntimeBindingManifest(**args)


def test_runtime_bindings():
    p = tp2_placement()
    b0, b1 = _binding(p), _binding(p, "w1", base=0x20000)
    assert b0.resource_kind is ResourceKind.MODEL_WEIGHT
    validate_runtime_binding(p, b0)
    validate_runtime_bindings(p, [b0, b1])
    with pytest.raises(ValueError, match="missing runtime binding participant: w1"):
        validate_runtime_bindings(p, [b0])
    with pytest.raises(ValueError, match="duplicate runtime binding participant"):
        validate_runtime_bindings(p, [b0, b0])
    with pytest.raises(ValueError, match="placement digest"):
        validate_runtime_binding(p, _binding(p, placement_digest="0" * 64))
    with pytest.raises(ValueError, match="revision differ"):
        validate_runtime_binding(p, _binding(p, revision="r2"))
    with pytest.raises(ValueError, match="missing placement fragment"):
        validate_runtime_binding(p, _binding(p, fragments=()))
    with pytest.raises(ValueError, match="unknown runtime binding participant: w9"):
        validate_runtime_binding(p, _binding(p, participant_id="w9"))
    # Two participants of one instance on one worker and device claiming the same memory.
    same = replace(b1, fragments=tuple(replace(f, worker_id="w0", address=0x10000,
                                               storage_address=0x10000) for f in b1.fragments))
    with pytest.raises(ValueError, match="address ranges overlap"):
        validate_runtime_bindings(p, [b0, same])
    with pytest.raises(ValueError, match="lowercase SHA-256 digest"):
        _binding(p, placement_digest="ABC")
    with pytest.raises(ValueError, match="duplicate placement fragment"):
        _binding(p, fragments=b0.fragments * 2)
    bad_stride = replace(b0, fragments=(replace(b0.fragments[0], strides_bytes=(16, 2),
                                                storage_nbytes=4096),))
    with pytest.raises(ValueError, match="canonical contiguous view"):
        validate_runtime_binding(p, bad_stride)


# ---- the stored manifest -------------------------------------------------------------------------


def _stored(**kw):
    frags = [StoredFragment(f"f{r}", "w", (4 * r, 0), (4, 4), f"g/payload/{r}", 0, 32)
             for r in (0, 1)]
    args = dict(namespace="ns", resource_id="model", revision="r1", weight_generation=1,
                group_id="g", manifest_key="g/manifest", tensors=(desc(),), fragments=frags,
                created_at="2026-12-01T00:00:00Z")
    args.update(kw)
    return WeightManifest(**args)


def test_stored_manifest_round_trip_and_identity():
    m = _stored()
    assert m.resource_kind is ResourceKind.MODEL_WEIGHT
    assert m.manifest_digest == hashlib.sha256(m.to_json().encode()).hexdigest()
    assert WeightManifest.from_json(m.to_json()) == m
    assert WeightManifest.from_json(m.to_json().encode()) == m
    ident = m.manifest_identity
    assert isinstance(ident, StoredManifestIdentity) and ident.content_sha256 == m.manifest_digest
    assert validate_weight_manifest_snapshot(m) == m
    with pytest.raises(ValueError, match="snapshot is invalid"):
        validate_weight_manifest_snapshot(object())
    with pytest.raises(ValueError, match="SHA-256 hex digest"):
        replace(ident, content_sha256="xyz")
    # Both halves in one object, back to back, are fine.
    packed = [StoredFragment(f"f{r}", "w", (4 * r, 0), (4, 4), "g/payload/all", 32 * r, 32)
              for r in (0, 1)]
    assert _stored(fragments=packed).fragments == tuple(packed)


def test_stored_manifest_rejects():
    half = StoredFragment("f0", "w", (0, 0), (4, 4), "g/payload/0", 0, 32)
    other = StoredFragment("f1", "w", (4, 0), (4, 4), "g/payload/0", 16, 32)
    cases = [
        (dict(manifest_key="h/manifest"), "manifest_key does not belong"),
        (dict(fragments=[replace(half, object_key="h/payload/0")]), "object_key does not belong"),
        (dict(fragments=[half]), "tensor is not fully covered: w"),
        (dict(fragments=[half, half]), "duplicate fragment_id"),
        (dict(fragments=[half, replace(half, fragment_id="f9", object_key="g/payload/9")]),
         "duplicate fragment geometry"),
        (dict(fragments=[half, other]), "object ranges overlap: f0 and f1 in g/payload/0"),
        (dict(fragments=[half, replace(half, fragment_id="fz", tensor_id="z")]),
         "unknown tensor_id: z"),
        (dict(fragments=[replace(half, nbytes=31)]), "byte size mismatch"),
        (dict(tensors=("w",)), "must contain TensorDescriptor"),
        (dict(weight_generation=-1), "weight_generation must be at least 0"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _stored(**kw)
    with pytest.raises(ValueError, match="alias group must contain the fragment tensor_id"):
        StoredFragment("f", "w", (0,), (1,), "k", 0, 1, aliases=("a", "b"))


def test_stored_aliases():
    a, b = desc("a"), desc("b")
    fa = StoredFragment("fa", "a", (0, 0), (8, 4), "g/payload/x", 0, 64, aliases=("b", "a"))
    fb = StoredFragment("fb", "b", (0, 0), (8, 4), "g/payload/y", 0, 64, aliases=("a", "b"))
    m = _stored(tensors=(a, b), fragments=(fa, fb))
    assert m.fragments[0].aliases == ("a", "b")
    with pytest.raises(ValueError, match="alias group is incomplete"):
        _stored(tensors=(a, b), fragments=(fa, replace(fb, aliases=())))
    with pytest.raises(ValueError, match="alias tensor descriptors differ"):
        _stored(tensors=(a, desc("b", layer_id=3)), fragments=(fa, fb))
    with pytest.raises(ValueError, match="alias references unknown tensor: b"):
        _stored(tensors=(a,), fragments=(fa,))


def test_stored_json_is_strict():
    doc = json.loads(_stored().to_json())
    for d, msg in (({**doc, "x": 1}, "schema fields do not match"),
                   ({**doc, "resource_kind": "kv_cache"}, "resource_kind must be model_weight"),
                   ({**doc, "fragments": [{**doc["fragments"][0], "nbytes": "32"}]},
                    "nbytes must be an integer")):
        with pytest.raises(ValueError, match=msg):
            WeightManifest.from_json(json.dumps(d))
    for raw, msg in (("{", "not valid JSON"), ("[1]", "must be a JSON object"),
                     ('{"a": Infinity}', "non-finite"), ('{"a": 1, "a": 1}', "duplicate JSON")):
        with pytest.raises(ValueError, match=msg):
            WeightManifest.from_json(raw)
