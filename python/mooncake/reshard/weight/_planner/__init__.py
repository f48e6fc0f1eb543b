"""The address-free N-D logical planner of model-weight reshards (public names:
:mod:`mooncake.reshard.weight.planner`)."""

from .api import (plan_placement_transfer, plan_placement_transfer_to_local_target,
                  plan_stored_transfer_to_target_placement)
from .contracts import (LogicalTransferOperation, LogicalTransferPlan, PipelineRouteGroup,
                        PlacementExecutorPlan, PlanningLimits, TransferRegion)
from .ownership import complete_parallel_source_replicas, parallel_tensor_owner

__all__ = [
    "LogicalTransferPlan",
    "LogicalTransferOperation",
    "PlanningLimits",
    "PipelineRouteGroup",
    "PlacementExecutorPlan",
    "TransferRegion",
    "complete_parallel_source_replicas",
    "parallel_tensor_owner",
    "plan_placement_transfer",
    "plan_placement_transfer_to_local_target",
    "plan_stored_transfer_to_target_placement",
]
