"""The model-weight logical planner's public names.

``plan_placement_transfer(source, target)`` returns a :class:`LogicalTransferPlan`: for each
target fragment, the transfer regions (N-D overlap boxes with their byte geometry) that rebuild
it from one complete source replica (TP and EP by box split and merge, PP by the declared
ownership, DP by a complete source replica in turn or the declared DP owner). It holds no
address, endpoint, lease or backend request. ``PlanningLimits`` bounds the regions and the
segments they lower to. The planner only copies: it never converts dtype or layout.
"""

from ._planner.api import (plan_placement_transfer, plan_placement_transfer_to_local_target,
                           plan_stored_transfer_to_target_placement)
from ._planner.contracts import (LogicalTransferOperation, LogicalTransferPlan,
                                 PipelineRouteGroup, PlacementExecutorPlan, PlanningLimits,
                                 TransferRegion)

__all__ = [
    "LogicalTransferPlan",
    "LogicalTransferOperation",
    "PlanningLimits",
    "PipelineRouteGroup",
    "PlacementExecutorPlan",
    "TransferRegion",
    "plan_placement_transfer",
    "plan_placement_transfer_to_local_target",
    "plan_stored_transfer_to_target_placement",
]
