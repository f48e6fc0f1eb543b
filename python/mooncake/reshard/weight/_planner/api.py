"""The planner's entry points."""

from typing import Optional

from ..placement import WeightPlacementManifest
from ..storage_manifest import WeightManifest
from .contracts import LogicalTransferPlan, PlanningLimits
from .core import _collect_placements, _logical_transfer_plan, _plan_transfer

__all__ = ["plan_placement_transfer", "plan_placement_transfer_to_local_target",
           "plan_stored_transfer_to_target_placement"]


def _same_generation(source, target):
    for name in ("resource_id", "revision", "weight_generation"):
        if getattr(source, name) != getattr(target, name):
            raise ValueError(f"source and target {name} differ")


def plan_placement_transfer(source_placement: WeightPlacementManifest,
                            target_placement: WeightPlacementManifest, *,
                            planning_limits: Optional[PlanningLimits] = None
                            ) -> LogicalTransferPlan:
    """The plan that rebuilds every target participant's fragments from a complete source
    placement of the same resource, revision and generation."""
    s_tensors, s_frags = _collect_placements((source_placement,), "source")
    t_tensors, t_frags = _collect_placements((target_placement,), "target")
    _same_generation(source_placement, target_placement)
    transfer = _plan_transfer(source_placement.resource_id, source_placement.revision,
                              s_tensors, s_frags, t_tensors, t_frags,
                              planning_limits=planning_limits)
    return _logical_transfer_plan(transfer, source_tensors=s_tensors, target_tensors=t_tensors,
                                  source_placement=source_placement, source_manifest=None,
                                  target_placement=target_placement)


def plan_placement_transfer_to_local_target(source_placement: WeightPlacementManifest,
                                            target_placement: WeightPlacementManifest,
                                            target_participant_id=None, *,
                                            planning_limits: Optional[PlanningLimits] = None
                                            ) -> LogicalTransferPlan:
    """The plan for one target participant only (the only one, when the target has one)."""
    s_tensors, s_frags = _collect_placements((source_placement,), "source")
    if target_participant_id is None:
        if target_placement.topology.world_size != 1:
            raise ValueError("target_participant_id is required for a multi-participant target")
        target_participant_id = target_placement.parts[0].participant_id
    part = next((p for p in target_placement.parts
                 if p.participant_id == target_participant_id), None)
    if part is None:
        raise ValueError(f"unknown target participant: {target_participant_id}")
    t_tensors = {t.tensor_id: t for t in part.tensors}
    _same_generation(source_placement, target_placement)
    transfer = _plan_transfer(source_placement.resource_id, source_placement.revision,
                              s_tensors, s_frags, t_tensors, list(part.fragments),
                              local_target=True, planning_limits=planning_limits)
    plan = _logical_transfer_plan(transfer, source_tensors=s_tensors, target_tensors=t_tensors,
                                  source_placement=source_placement, source_manifest=None,
                                  target_placement=target_placement,
                                  target_participant_ids=frozenset({target_participant_id}))
    if len(plan.target_executors) != 1:
        raise ValueError("local target placement must describe exactly one executor")
    return plan


def plan_stored_transfer_to_target_placement(source_manifest: WeightManifest,
                                             target_placement: WeightPlacementManifest, *,
                                             planning_limits: Optional[PlanningLimits] = None
                                             ) -> LogicalTransferPlan:
    """The plan that fills a target placement from a committed stored manifest; the plan
    keeps the manifest's identity so a later binding can check it reads the same snapshot."""
    t_tensors, t_frags = _collect_placements((target_placement,), "target")
    _same_generation(source_manifest, target_placement)
    s_tensors = {t.tensor_id: t for t in source_manifest.tensors}
    transfer = _plan_transfer(source_manifest.resource_id, source_manifest.revision, s_tensors,
                              source_manifest.fragments, t_tensors, t_frags,
                              planning_limits=planning_limits)
    return _logical_transfer_plan(transfer, source_tensors=s_tensors, target_tensors=t_tensors,
                                  source_placement=None, source_manifest=source_manifest,
                                  target_placement=target_placement)
