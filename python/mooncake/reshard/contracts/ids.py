"""Identity types of the reshard contracts.

Each is a ``typing.NewType`` over ``str``: on the wire and at run time an ID is a plain string,
while a type checker keeps a resource ID from being passed where a placement ID is wanted. Wire
decoders and framework adapters make them at their boundary.
"""

from typing import NewType

__all__ = [
    "LeaseId",
    "ParticipantId",
    "PlacementFragmentId",
    "PlacementId",
    "PlacementSetId",
    "ResourceId",
    "RevisionId",
    "RuntimeFragmentId",
    "RuntimeInstanceId",
    "StoredFragmentId",
    "TensorId",
    "TopologyId",
]

ResourceId = NewType("ResourceId", str)
PlacementId = NewType("PlacementId", str)
ParticipantId = NewType("ParticipantId", str)
PlacementFragmentId = NewType("PlacementFragmentId", str)
RuntimeFragmentId = NewType("RuntimeFragmentId", str)
TensorId = NewType("TensorId", str)
TopologyId = NewType("TopologyId", str)
PlacementSetId = NewType("PlacementSetId", str)
RevisionId = NewType("RevisionId", str)
RuntimeInstanceId = NewType("RuntimeInstanceId", str)
LeaseId = NewType("LeaseId", str)
StoredFragmentId = NewType("StoredFragmentId", str)
