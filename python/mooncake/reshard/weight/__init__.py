"""``mooncake.reshard.weight``: the model-weight specialization of the reshard contracts.

Here: parallel ranks and axes, tensor descriptors, address-free placement fragments, the parallel
topology, placement parts, the complete placement (``WeightPlacementManifest``, with its
canonical ID and digest), its JSON wire form, runtime bindings with their checks, the stored
manifest (``WeightManifest``) and the logical planner (``plan_placement_transfer`` and its
relatives, :mod:`.planner`), all with the reference's fields, canonical IDs and refusals.
"""

from . import manifest, planner
from .manifest import (OwnershipAxis, ParallelRank, ParallelTopology, PlacementFragment,
                       ReplicatedAxis, RuntimeBindingFragment, SplitAxis, TensorDescriptor,
                       TopologyParticipant, WeightPlacementManifest, WeightPlacementPart,
                       WeightRuntimeBindingManifest, validate_runtime_binding,
                       validate_runtime_bindings)
from .serde import weight_placement_from_json, weight_placement_to_json
from .planner import (LogicalTransferOperation, LogicalTransferPlan, PipelineRouteGroup,
                      PlacementExecutorPlan, PlanningLimits, TransferRegion,
                      plan_placement_transfer, plan_placement_transfer_to_local_target,
                      plan_stored_transfer_to_target_placement)
from .storage_manifest import StoredFragment, WeightManifest

# The manifest's and the planner's names are listed in their modules; this adds the rest.
__all__ = [
    *manifest.__all__,
    "weight_placement_from_json",
    "weight_placement_to_json",
    "StoredFragment",
    "WeightManifest",
    *planner.__all__,
]
