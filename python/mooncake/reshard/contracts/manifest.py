"""The resource-neutral manifest contracts: structural protocols (a concrete manifest satisfies
them by having the fields, never by inheriting from them) and the identity fence between a
placement and a runtime binding of it."""

from enum import Enum
from typing import Protocol

from .ids import LeaseId, PlacementId, ResourceId, RuntimeInstanceId

__all__ = [
    "PlacementManifest",
    "ResourceKind",
    "ResourceManifest",
    "RuntimeBindingManifest",
    "StoredResourceManifest",
    "validate_resource_binding_identity",
]


class ResourceKind(str, Enum):
    """What kind of reusable resource a manifest describes; its value is the wire form."""

    MODEL_WEIGHT = "model_weight"
    KV_CACHE = "kv_cache"  # reserved: no manifest of this kind exists yet


class ResourceManifest(Protocol):
    """Anything that names one reusable resource."""

    @property
    def resource_id(self) -> ResourceId:
        """The resource's stable identity."""
        ...

    @property
    def resource_kind(self) -> ResourceKind:
        """Which kind of resource it is."""
        ...


class PlacementManifest(ResourceManifest, Protocol):
    """A complete, address-free logical placement of a resource."""

    @property
    def placement_id(self) -> PlacementId:
        """The placement's stable identity."""
        ...

    @property
    def digest(self) -> str:
        """The digest of the placement's canonical serialization."""
        ...


class RuntimeBindingManifest(ResourceManifest, Protocol):
    """Where one live runtime holds a placement's fragments, and the fences on that state."""

    @property
    def placement_id(self) -> PlacementId:
        """The placement this binding holds."""
        ...

    @property
    def placement_digest(self) -> str:
        """That placement's digest, as the binding saw it."""
        ...

    @property
    def instance_id(self) -> RuntimeInstanceId:
        """The runtime instance that owns the memory."""
        ...

    @property
    def generation(self) -> int:
        """The runtime's generation (a restart or reload is a new one)."""
        ...

    @property
    def lease_id(self) -> LeaseId:
        """The lease under which the memory stays valid."""
        ...


class StoredResourceManifest(ResourceManifest, Protocol):
    """A resource's metadata as kept in persistent storage."""

    namespace: str
    group_id: str
    manifest_key: str
    created_at: str


def validate_resource_binding_identity(placement: PlacementManifest,
                                       binding: RuntimeBindingManifest) -> None:
    """ValueError unless binding holds exactly this placement: the same resource kind and ID, the
    same placement ID and the same digest (checked in that order; the message names the field)."""
    checks = (
        ("resource_kind", placement.resource_kind, binding.resource_kind),
        ("resource_id", placement.resource_id, binding.resource_id),
        ("placement_id", placement.placement_id, binding.placement_id),
        ("digest", placement.digest, binding.placement_digest),
    )
    for name, want, got in checks:
        if want != got:
            what = "placement digest" if name == "digest" else name
            raise ValueError(f"placement and runtime binding {what} differ: {want!r} != {got!r}")
