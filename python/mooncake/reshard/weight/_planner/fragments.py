"""The fragment kinds the logical planner sees: placement boxes (both sides) or stored object
ranges (a Store-backed source). Runtime addresses never reach it."""

from typing import Union

from ..placement import PlacementFragment
from ..storage_manifest import StoredFragment

__all__ = ["GeometryFragment", "LogicalSourceFragment", "LogicalTargetFragment"]

LogicalSourceFragment = Union[PlacementFragment, StoredFragment]
LogicalTargetFragment = PlacementFragment
GeometryFragment = Union[PlacementFragment, StoredFragment]
