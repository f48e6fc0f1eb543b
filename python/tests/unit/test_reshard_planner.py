"""mooncake.reshard.weight's logical planner: TP and EP re-splits, DP replica choice, stored
sources, one local target, the region byte geometry and its lowering, limits, and refusals."""

import pickle

import pytest

from mooncake.reshard.weight import (ParallelRank, ParallelTopology, PlacementFragment,
                                     PlanningLimits, ReplicatedAxis, SplitAxis, StoredFragment,
                                     TensorDescriptor, TopologyParticipant, TransferRegion,
                                     WeightManifest, WeightPlacementManifest,
                                     plan_placement_transfer,
                                     plan_placement_transfer_to_local_target,
                                     plan_stored_transfer_to_target_placement)
from mooncake.reshard.weight._planner import geometry
from mooncake.reshard.weight._planner.core import _collect_placements

ROWS, COLS, ITEM = 8, 6, 2


def desc(axes=(SplitAxis("tp", 1),), shard_dims=(1,), tensor_id="w", **kw):
    return TensorDescriptor(tensor_id, (ROWS, COLS), "bf16", ITEM, shard_dims, "rm", axes, **kw)


def placement(ranks, boxes, tensors=None, tp=None, dp=1, revision="r1", pset="ps"):
    """A placement of tensor w: fragment (offset, shape) i on ranks[i]."""
    tensors = tensors or [desc()]
    people = {r: TopologyParticipant(f"p-dp{r.dp}-tp{r.tp}", r) for r in ranks}
    topo = ParallelTopology(tp_size=tp or max(r.tp for r in ranks) + 1, pp_size=1, ep_size=1,
                            dp_size=dp, participants=tuple(people.values()))
    frags = [PlacementFragment("w", o, s, s[0] * s[1] * ITEM, r)
             for r, (o, s) in zip(ranks, boxes)]
    return WeightPlacementManifest.from_fragments(
        resource_id="model", revision=revision, weight_generation=1, placement_set_id=pset,
        topology=topo, tensors=tensors, fragments=frags)


def column_split(n, dp=0):
    w = COLS // n
    return [ParallelRank(dp=dp, tp=i) for i in range(n)], [((0, i * w), (ROWS, w))
                                                           for i in range(n)]


def apply(plan, source_bytes):
    """Runs the plan's segments on bytearrays: {target fragment id: bytes}."""
    out = {f.placement_fragment_id: bytearray(f.nbytes) for f in plan.target_placement.fragments}
    for op in plan.operations:
        src = source_bytes[op.source.fragment_id]
        dst = out[op.target.placement_fragment_id]
        for s, t, n in op.iter_segments(max_segments=10_000):
            dst[t:t + n] = src[s:s + n]
    return out


def dense(frag):
    """The bytes of frag cut from a tensor whose element (r, c) is r * COLS + c (as u16)."""
    (r0, c0), (h, w) = frag.global_offset, frag.local_shape
    return b"".join((r * COLS + c).to_bytes(ITEM, "little")
                    for r in range(r0, r0 + h) for c in range(c0, c0 + w))


def test_tp2_to_tp3_moves_exactly_the_right_bytes():
    src = placement(*column_split(2))
    dst = placement(*column_split(3), pset="target")
    plan = plan_placement_transfer(src, dst)
    assert plan.source_placement_id == src.placement_id
    assert plan.target_placement_id == dst.placement_id
    assert plan.total_bytes == ROWS * COLS * ITEM
    # Column blocks of width 3 into width 2: the middle target straddles both sources.
    assert len(plan.operations) == 4
    got = apply(plan, {f.fragment_id: dense(f) for f in src.fragments})
    for f in dst.fragments:
        assert bytes(got[f.placement_fragment_id]) == dense(f)
    for op in plan.operations:
        assert isinstance(op, TransferRegion)
        assert op.inner_bytes == op.overlap_shape[1] * ITEM and op.repeat == ROWS
    assert [e.participant_id for e in plan.target_executors] == ["p-dp0-tp0", "p-dp0-tp1",
                                                                  "p-dp0-tp2"]
    for e in plan.target_executors:
        assert plan.operation_indices_for_executor(e, "target")
    assert len(plan.pipeline_routes) == 1 and plan.pipeline_routes[0].target_pp == 0
    again = pickle.loads(pickle.dumps(plan))
    assert again.operations == plan.operations


def test_row_split_is_one_contiguous_run_per_overlap():
    rows = desc(axes=(SplitAxis("tp", 0),), shard_dims=(0,))
    src = placement([ParallelRank(tp=0), ParallelRank(tp=1)],
                    [((0, 0), (4, COLS)), ((4, 0), (4, COLS))], tensors=[rows])
    dst = placement([ParallelRank(tp=0)], [((0, 0), (ROWS, COLS))], tensors=[rows],
                    pset="target")
    plan = plan_placement_transfer(src, dst)
    assert [(op.target_base_offset, op.inner_bytes, op.outer_loop_counts)
            for op in plan.operations] == [(0, 4 * COLS * ITEM, ()),
                                           (4 * COLS * ITEM, 4 * COLS * ITEM, ())]
    assert plan.operations[0].source_stride == 0


def test_each_target_dp_replica_reads_a_complete_source_replica_in_turn():
    rep = desc(axes=(ReplicatedAxis("dp"), SplitAxis("tp", 1)))
    r2, b2 = column_split(2, dp=0)
    r2b, b2b = column_split(2, dp=1)
    src = placement(r2 + r2b, b2 + b2b, tensors=[rep], dp=2)
    t0, c0 = column_split(1, dp=0)
    t1, c1 = column_split(1, dp=1)
    dst = placement(t0 + t1, c0 + c1, tensors=[rep], dp=2, pset="target")
    plan = plan_placement_transfer(src, dst)
    for op in plan.operations:
        assert op.source.rank.dp == op.target.rank.dp
    # One source replica only: both targets read it.
    one = placement(r2, b2, tensors=[rep], dp=2)
    assert {op.source.rank.dp for op in plan_placement_transfer(one, dst).operations} == {0}


def test_stored_source_and_local_target():
    frags = [StoredFragment(f"s{i}", "w", (0, 3 * i), (ROWS, 3), f"g/payload/{i}", 0,
                            ROWS * 3 * ITEM) for i in (0, 1)]
    manifest = WeightManifest(namespace="ns", resource_id="model", revision="r1",
                              weight_generation=1, group_id="g", manifest_key="g/manifest",
                              tensors=(desc(),), fragments=frags, created_at="t")
    dst = placement(*column_split(3), pset="target")
    plan = plan_stored_transfer_to_target_placement(manifest, dst)
    assert plan.source_manifest_identity == manifest.manifest_identity
    assert plan.source_executors == () and {op.source.fragment_id for op in plan.operations} \
        == {"s0", "s1"}
    src = placement(*column_split(2))
    local = plan_placement_transfer_to_local_target(src, dst, "p-dp0-tp1")
    assert [e.participant_id for e in local.target_executors] == ["p-dp0-tp1"]
    assert {op.target.rank.tp for op in local.operations} == {1}
    with pytest.raises(ValueError, match="target_participant_id is required"):
        plan_placement_transfer_to_local_target(src, dst)
    with pytest.raises(ValueError, match="unknown target participant: nobody"):
        plan_placement_transfer_to_local_target(src, dst, "nobody")


def test_limits_and_refusals():
    src = placement(*column_split(2))
    dst = placement(*column_split(3), pset="target")
    with pytest.raises(ValueError, match="max_transfer_regions"):
        plan_placement_transfer(src, dst, planning_limits=PlanningLimits(max_transfer_regions=3))
    with pytest.raises(ValueError, match="max_segments_per_region"):
        plan_placement_transfer(src, dst,
                                planning_limits=PlanningLimits(max_segments_per_region=7))
    with pytest.raises(ValueError, match="max_total_lowered_segments"):
        plan_placement_transfer(src, dst,
                                planning_limits=PlanningLimits(max_total_lowered_segments=20))
    with pytest.raises(ValueError, match="must be a positive integer"):
        PlanningLimits(max_transfer_regions=0)
    with pytest.raises(ValueError, match="source and target revision differ"):
        plan_placement_transfer(src, placement(*column_split(3), revision="r2"))
    col_major = TensorDescriptor("w", (ROWS, COLS), "bf16", ITEM, (1,), "col-major",
                                 (SplitAxis("tp", 1),))
    other = placement(*column_split(3), tensors=[col_major], pset="target")
    with pytest.raises(ValueError, match="layout mismatch for tensor w"):
        plan_placement_transfer(src, other)
    with pytest.raises(ValueError, match="requires one complete WeightPlacementManifest"):
        _collect_placements((src, src), "source")
    op = plan_placement_transfer(src, dst).operations[0]
    with pytest.raises(ValueError, match="exceeds max_segments"):
        list(op.iter_segments(max_segments=1))
    with pytest.raises(ValueError, match="not canonical|inconsistent"):
        TransferRegion(op.tensor_id, op.source, op.target, op.overlap_offset, op.overlap_shape,
                       op.source_base_offset, op.target_base_offset + ITEM, op.inner_bytes,
                       op.outer_loop_counts, op.source_strides, op.target_strides)


def test_candidate_index_returns_only_meeting_boxes():
    frags = [StoredFragment(f"s{i}", "w", (i, 0), (1, 4), "k", 8 * i, 8) for i in range(64)]
    idx = geometry._CandidateBoxIndex.build(tuple((f,) for f in frags))
    target = PlacementFragment("w", (10, 0), (3, 4), 24, ParallelRank())
    assert [g[0].fragment_id for g in idx.query(target)] == ["s10", "s11", "s12"]
