"""The runtime binding of a model-weight placement: where one live participant holds its
fragments, and the fences (instance, generation, lease) on that memory."""

from dataclasses import dataclass

from ..contracts import (LeaseId, ParticipantId, PlacementId, ResourceId, RevisionId,
                         RuntimeBindingFragment, RuntimeInstanceId)
from . import _checks as ck
from .types import ModelWeightResource

__all__ = ["WeightRuntimeBindingManifest"]


@dataclass(frozen=True)
class WeightRuntimeBindingManifest(ModelWeightResource):
    """One participant's physical fragments for the placement ``placement_id`` (whose digest
    it repeats), owned by runtime ``instance_id`` at ``generation`` under lease ``lease_id``.
    Fragments are stored sorted by placement fragment ID; each logical fragment and each runtime
    fragment ID appears once."""

    resource_id: ResourceId
    placement_id: PlacementId
    placement_digest: str
    instance_id: RuntimeInstanceId
    generation: int
    lease_id: LeaseId
    revision: RevisionId
    participant_id: ParticipantId
    fragments: tuple

    def __post_init__(self):
        ck.text_fields(self, "resource_id", "placement_id", "instance_id", "lease_id", "revision",
                       "participant_id")
        ck.sha256_digest(self.placement_digest, "placement_digest")
        ck.u64(self.generation, "generation")
        frags = ck.items_of(self.fragments, "WeightRuntimeBindingManifest fragments",
                            RuntimeBindingFragment)
        frags = tuple(sorted(frags, key=lambda f: f.placement_fragment_id))
        object.__setattr__(self, "fragments", frags)
        if len({f.placement_fragment_id for f in frags}) != len(frags):
            raise ValueError("duplicate placement fragment in runtime binding")
        if len({f.fragment_id for f in frags}) != len(frags):
            raise ValueError("duplicate runtime fragment_id in runtime binding")
