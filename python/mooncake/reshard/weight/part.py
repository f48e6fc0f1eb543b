"""One participant's address-free contribution to a model-weight placement."""

from dataclasses import dataclass

from ..contracts import ParticipantId, PlacementSetId, ResourceId, RevisionId, TopologyId
from . import _checks as ck
from .types import ParallelRank, PlacementFragment, TensorDescriptor
from .validation import _validate_fragments

__all__ = ["WeightPlacementPart"]


@dataclass(frozen=True)
class WeightPlacementPart:
    """The tensors and logical fragments one participant holds, with the identity of the
    placement it belongs to (resource, revision, weight generation, placement set, topology).

    Every fragment has the part's rank, every tensor is referenced by some fragment, and the
    fragments pass the part-level checks (validation.py). Tensors are stored sorted by ID and
    fragments by fragment ID, so equal parts compare equal."""

    resource_id: ResourceId
    revision: RevisionId
    weight_generation: int
    placement_set_id: PlacementSetId
    topology_id: TopologyId
    participant_id: ParticipantId
    rank: ParallelRank
    tensors: tuple
    fragments: tuple

    def __post_init__(self):
        ck.text_fields(self, "resource_id", "revision", "placement_set_id", "topology_id",
                       "participant_id")
        ck.u64(self.weight_generation, "weight_generation")
        if not isinstance(self.rank, ParallelRank):
            raise ValueError("placement part rank must be a ParallelRank")
        tensors = ck.items_of(self.tensors, "WeightPlacementPart tensors", TensorDescriptor)
        fragments = ck.items_of(self.fragments, "WeightPlacementPart fragments",
                                PlacementFragment)
        if any(f.rank != self.rank for f in fragments):
            raise ValueError("placement part fragment rank differs from part rank")
        unused = sorted({t.tensor_id for t in tensors} - {f.tensor_id for f in fragments})
        if unused:
            raise ValueError(f"placement part contains an unreferenced tensor: {unused[0]}")
        tensors = tuple(sorted(tensors, key=lambda t: t.tensor_id))
        fragments = tuple(sorted(fragments, key=lambda f: f.placement_fragment_id))
        object.__setattr__(self, "tensors", tensors)
        object.__setattr__(self, "fragments", fragments)
        _validate_fragments(tensors, fragments)
