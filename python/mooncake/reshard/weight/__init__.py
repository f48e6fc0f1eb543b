"""``mooncake.reshard.weight``: the model-weight specialization of the reshard contracts.

Here so far: the parallel ranks and axes, tensor descriptors, address-free placement fragments,
the parallel topology and one participant's placement part, with the reference's fields, canonical
IDs and checks. Not here yet: the complete placement manifest, runtime binding manifests, the
stored manifest, the JSON wire form and the logical planner (docs/reshard.md).
"""

from ..contracts import RuntimeBindingFragment
from .part import WeightPlacementPart
from .topology import ParallelTopology, TopologyParticipant
from .types import (OwnershipAxis, ParallelRank, PlacementFragment, ReplicatedAxis, SplitAxis,
                    TensorDescriptor)

__all__ = [
    "ParallelRank",
    "ParallelTopology",
    "PlacementFragment",
    "WeightPlacementPart",
    "RuntimeBindingFragment",
    "SplitAxis",
    "ReplicatedAxis",
    "OwnershipAxis",
    "TensorDescriptor",
    "TopologyParticipant",
]
