"""The parallel topology of one model-weight placement: the four axis sizes and the exact
participants selected."""

from dataclasses import asdict, dataclass
from typing import Optional

from ..contracts import ParticipantId, TopologyId
from . import _checks as ck
from .types import ParallelRank

__all__ = ["ParallelTopology", "TopologyParticipant"]


@dataclass(frozen=True)
class TopologyParticipant:
    """One runtime participant and its parallel coordinates."""

    participant_id: ParticipantId
    rank: ParallelRank

    def __post_init__(self):
        ck.text(self.participant_id, "participant_id")
        if not isinstance(self.rank, ParallelRank):
            raise ValueError("topology participant rank must be a ParallelRank")


@dataclass(frozen=True, init=False)
class ParallelTopology:
    """TP, PP, EP and DP sizes and the participants of one placement (sorted by ID).

    ``world_size`` is the number of participants, never the product of the sizes: TP and EP may
    share workers, and a placement may select one DP replica of a runtime that declares more.
    ``topology_id`` is derived from the content; a given one must match it."""

    tp_size: int
    pp_size: int
    ep_size: int
    dp_size: int
    participants: tuple
    topology_id: TopologyId

    def __init__(self, *, tp_size: int, pp_size: int, ep_size: int, dp_size: int,
                 participants: tuple, topology_id: Optional[TopologyId] = None) -> None:
        sizes = {"tp": tp_size, "pp": pp_size, "ep": ep_size, "dp": dp_size}
        for axis, size in sizes.items():
            ck.integer(size, f"{axis}_size", 1)
        people = ck.items_of(participants, "ParallelTopology participants", TopologyParticipant)
        if not people:
            raise ValueError("parallel topology participants must not be empty")
        people = tuple(sorted(people, key=lambda p: p.participant_id))
        ids = [p.participant_id for p in people]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate topology participant_id")
        ranks = [p.rank for p in people]
        if len(set(ranks)) != len(ranks):
            raise ValueError("duplicate topology parallel rank")
        for p in people:
            for axis, size in sizes.items():
                if getattr(p.rank, axis) >= size:
                    raise ValueError(f"{axis} rank is out of range for participant "
                                     f"{p.participant_id}")
        canonical = TopologyId(ck.content_id({
            "schema": "weight-parallel-topology", "tp_size": tp_size, "pp_size": pp_size,
            "ep_size": ep_size, "dp_size": dp_size,
            "participants": [asdict(p) for p in people]}))
        if topology_id is not None and topology_id != canonical:
            raise ValueError("topology_id does not match canonical topology")
        for name, value in (("tp_size", tp_size), ("pp_size", pp_size), ("ep_size", ep_size),
                            ("dp_size", dp_size), ("participants", people),
                            ("topology_id", canonical)):
            object.__setattr__(self, name, value)

    @property
    def world_size(self) -> int:
        """How many participants the placement has."""
        return len(self.participants)

    def participant(self, participant_id: ParticipantId) -> TopologyParticipant:
        """The participant with this ID; ValueError for an unknown one."""
        for p in self.participants:
            if p.participant_id == participant_id:
                return p
        raise ValueError(f"unknown topology participant: {participant_id}")
