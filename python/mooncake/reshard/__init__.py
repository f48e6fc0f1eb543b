"""``mooncake.reshard``: the reference's framework-neutral contracts for resharding reusable model
runtime resources (model weights now; ``kv_cache`` is a reserved kind).

Pure Python with no dependencies, so it needs no extra and loads no native code. The top level
names only the resource-neutral contracts; :mod:`mooncake.reshard.contracts` has the identity types
and the physical fragment, :mod:`mooncake.reshard.geometry` the N-D logical-box checks a planner
uses. docs/reshard.md says what of the reference's package is here.
"""

from .contracts import PlacementManifest, ResourceKind, ResourceManifest, RuntimeBindingManifest

__all__ = [
    "ResourceKind",
    "ResourceManifest",
    "PlacementManifest",
    "RuntimeBindingManifest",
]
