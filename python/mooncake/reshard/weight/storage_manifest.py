"""The stored form of a model-weight generation: fragments in Store objects and the manifest that
names them (the logical source of a Store-backed reshard)."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from math import prod

from ..contracts import ResourceId, ResourceKind, RevisionId, StoredFragmentId, TensorId
from ..geometry import boxes_overlap
from . import _checks as ck
from .placement import axis_identity
from .serde import _axis, _fields, _obj
from .types import ModelWeightResource, TensorDescriptor, _aliases, validate_fragment_geometry

__all__ = ["StoredFragment", "StoredManifestIdentity", "WeightManifest",
           "validate_weight_manifest_snapshot"]


@dataclass(frozen=True)
class _ManifestPlace:
    """The fields that name a stored manifest, first in both the manifest and its identity."""

    namespace: str
    resource_id: ResourceId
    revision: RevisionId
    weight_generation: int
    group_id: str
    manifest_key: str


@dataclass(frozen=True)
class StoredManifestIdentity(_ManifestPlace):
    """Where a committed manifest lives (namespace, group, key) and what it holds (resource,
    revision, generation, and the SHA-256 of its canonical JSON)."""

    content_sha256: str

    def __post_init__(self):
        ck.text_fields(self, "namespace", "resource_id", "revision", "group_id", "manifest_key",
                       "content_sha256")
        ck.u64(self.weight_generation, "weight_generation")
        if len(self.content_sha256) != 64 or self.content_sha256.strip("0123456789abcdef"):
            raise ValueError("content_sha256 must be a SHA-256 hex digest")


@dataclass(frozen=True)
class StoredFragment:
    """One tensor box stored as ``nbytes`` at ``object_offset`` in the Store object
    ``object_key``, with its optional alias group (sorted; it names the fragment's tensor)."""

    fragment_id: StoredFragmentId
    tensor_id: TensorId
    global_offset: tuple
    local_shape: tuple
    object_key: str
    object_offset: int
    nbytes: int
    aliases: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "global_offset",
                           ck.int_tuple(self.global_offset, "global_offset", 0))
        object.__setattr__(self, "local_shape", ck.int_tuple(self.local_shape, "local_shape", 1))
        ck.text_fields(self, "fragment_id", "tensor_id", "object_key")
        ck.integer(self.object_offset, "object_offset", 0)
        ck.integer(self.nbytes, "nbytes", 1)
        group = _aliases(self.aliases)
        if group and len(group) < 2:
            raise ValueError("alias group must contain at least two tensor IDs")
        if group and self.tensor_id not in group:
            raise ValueError("alias group must contain the fragment tensor_id")
        object.__setattr__(self, "aliases", group)


_MANIFEST_FIELDS = frozenset({"resource_kind", "namespace", "resource_id", "revision",
                              "weight_generation", "group_id", "manifest_key", "tensors",
                              "fragments", "created_at"})
_TENSOR_FIELDS = frozenset({"tensor_id", "global_shape", "dtype", "itemsize", "layer_id",
                            "expert_id", "layout_fingerprint", "shard_dims", "parallel_axes"})
_FRAGMENT_FIELDS = frozenset({"fragment_id", "tensor_id", "global_offset", "local_shape",
                              "object_key", "object_offset", "nbytes", "aliases"})


@dataclass(frozen=True)
class WeightManifest(_ManifestPlace, ModelWeightResource):
    """A committed weight generation in the Store: its tensors and the stored fragments that
    cover each exactly once, all under the group ``group_id`` (the manifest is
    ``<group_id>/manifest``, payload objects ``<group_id>/payload/...``).

    Construction checks the keys, the fragments' geometry, exact coverage, alias groups (every
    member stored at the same box, with identical descriptors) and that no two fragments share
    bytes of one object; ``manifest_digest`` is the SHA-256 of :meth:`to_json`."""

    tensors: tuple
    fragments: tuple
    created_at: str
    manifest_digest: str = field(init=False)

    def __post_init__(self):
        ck.text_fields(self, "namespace", "resource_id", "revision", "group_id", "manifest_key",
                       "created_at")
        object.__setattr__(self, "tensors",
                           ck.items_of(self.tensors, "WeightManifest tensors", TensorDescriptor))
        object.__setattr__(self, "fragments", ck.items_of(self.fragments,
                                                          "WeightManifest fragments",
                                                          StoredFragment))
        ck.u64(self.weight_generation, "weight_generation")
        if self.manifest_key != f"{self.group_id}/manifest":
            raise ValueError("manifest_key does not belong to manifest group")
        prefix = f"{self.group_id}/payload/"
        if any(not f.object_key.startswith(prefix) for f in self.fragments):
            raise ValueError("payload object_key does not belong to manifest group")
        _check_fragments(self.tensors, self.fragments)
        _check_aliases(self.tensors, self.fragments)
        _check_coverage(self.tensors, self.fragments)
        _check_object_ranges(self.fragments)
        object.__setattr__(self, "manifest_digest",
                           hashlib.sha256(self.to_json().encode("utf-8")).hexdigest())

    @property
    def manifest_identity(self) -> StoredManifestIdentity:
        return StoredManifestIdentity(
            namespace=self.namespace, resource_id=self.resource_id, revision=self.revision,
            weight_generation=self.weight_generation, group_id=self.group_id,
            manifest_key=self.manifest_key, content_sha256=self.manifest_digest)

    def to_json(self) -> str:
        """The canonical JSON (sorted keys, no spaces, UTF-8 kept as is)."""
        raw = {
            "resource_kind": self.resource_kind.value,
            "namespace": self.namespace,
            "resource_id": self.resource_id,
            "revision": self.revision,
            "weight_generation": self.weight_generation,
            "group_id": self.group_id,
            "manifest_key": self.manifest_key,
            "tensors": [{"tensor_id": t.tensor_id, "global_shape": list(t.global_shape),
                         "dtype": t.dtype, "itemsize": t.itemsize, "layer_id": t.layer_id,
                         "expert_id": t.expert_id, "layout_fingerprint": t.layout_fingerprint,
                         "shard_dims": list(t.shard_dims),
                         "parallel_axes": [axis_identity(a) for a in t.parallel_axes]}
                        for t in self.tensors],
            "fragments": [asdict(f) for f in self.fragments],
            "created_at": self.created_at,
        }
        return json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, value) -> "WeightManifest":
        """The manifest a canonical JSON document (str or bytes) describes; ValueError for
        invalid JSON, duplicate keys, NaN or Infinity, or anything from_dict refuses."""
        raw = ck.strict_json(value, "weight manifest")
        return cls.from_dict(_obj(raw, "weight manifest"))

    @classmethod
    def from_dict(cls, raw: Mapping) -> "WeightManifest":
        """The manifest of a decoded document with exactly the canonical fields."""
        raw = _fields(raw, _MANIFEST_FIELDS, "weight manifest")
        if raw["resource_kind"] != ResourceKind.MODEL_WEIGHT.value:
            raise ValueError("weight manifest resource_kind must be model_weight")
        tensors = []
        for i, item in enumerate(ck.sequence(raw["tensors"], "WeightManifest tensors")):
            t = _fields(item, _TENSOR_FIELDS, "tensor descriptor")
            axes = tuple(_axis(a, j) for j, a in enumerate(
                ck.sequence(t["parallel_axes"], f"stored tensor parallel_axes {i}")))
            tensors.append(TensorDescriptor(
                tensor_id=ck.text(t["tensor_id"], "stored tensor tensor_id"),
                global_shape=ck.int_tuple(t["global_shape"], "stored tensor global_shape", 1),
                dtype=ck.text(t["dtype"], "stored tensor dtype"),
                itemsize=ck.integer(t["itemsize"], "stored tensor itemsize", 1),
                layer_id=_opt(t["layer_id"], "stored tensor layer_id"),
                expert_id=_opt(t["expert_id"], "stored tensor expert_id"),
                layout_fingerprint=ck.text(t["layout_fingerprint"],
                                           "stored tensor layout_fingerprint"),
                shard_dims=ck.int_tuple(t["shard_dims"], "stored tensor shard_dims", 0),
                parallel_axes=axes))
        fragments = tuple(_fragment(x) for x in
                          ck.sequence(raw["fragments"], "WeightManifest fragments"))
        return cls(namespace=ck.text(raw["namespace"], "namespace"),
                   resource_id=ck.text(raw["resource_id"], "resource_id"),
                   revision=ck.text(raw["revision"], "revision"),
                   weight_generation=ck.u64(raw["weight_generation"], "weight_generation"),
                   group_id=ck.text(raw["group_id"], "group_id"),
                   manifest_key=ck.text(raw["manifest_key"], "manifest_key"),
                   tensors=tuple(tensors), fragments=fragments,
                   created_at=ck.text(raw["created_at"], "created_at"))


def validate_weight_manifest_snapshot(manifest: WeightManifest) -> WeightManifest:
    """A manifest rebuilt from its fields (so every check runs again) before a plan trusts it;
    ValueError for anything that is not a valid WeightManifest."""
    if not isinstance(manifest, WeightManifest):
        raise ValueError("weight manifest snapshot is invalid")
    try:
        return WeightManifest(
            namespace=manifest.namespace, resource_id=manifest.resource_id,
            revision=manifest.revision, weight_generation=manifest.weight_generation,
            group_id=manifest.group_id, manifest_key=manifest.manifest_key,
            tensors=manifest.tensors, fragments=manifest.fragments,
            created_at=manifest.created_at)
    except (AttributeError, TypeError) as exc:
        raise ValueError("weight manifest snapshot is invalid") from exc


def _opt(value, label):
    return None if value is None else ck.integer(value, label, 0)


def _fragment(value):
    f = _fields(value, _FRAGMENT_FIELDS, "stored fragment")
    return StoredFragment(
        fragment_id=ck.text(f["fragment_id"], "stored fragment fragment_id"),
        tensor_id=ck.text(f["tensor_id"], "stored fragment tensor_id"),
        global_offset=ck.int_tuple(f["global_offset"], "stored fragment global_offset", 0),
        local_shape=ck.int_tuple(f["local_shape"], "stored fragment local_shape", 1),
        object_key=ck.text(f["object_key"], "stored fragment object_key"),
        object_offset=ck.integer(f["object_offset"], "stored fragment object_offset", 0),
        nbytes=ck.integer(f["nbytes"], "stored fragment nbytes", 1),
        aliases=tuple(ck.text(a, "stored fragment alias")
                      for a in ck.sequence(f["aliases"], "stored fragment aliases")))


def _check_fragments(tensors, fragments):
    by_id = {}
    for t in tensors:
        if t.tensor_id in by_id:
            raise ValueError(f"duplicate tensor_id: {t.tensor_id}")
        by_id[t.tensor_id] = t
    seen = set()
    for f in fragments:
        if f.fragment_id in seen:
            raise ValueError(f"duplicate fragment_id: {f.fragment_id}")
        seen.add(f.fragment_id)
        if f.tensor_id not in by_id:
            raise ValueError(f"unknown tensor_id: {f.tensor_id}")
        validate_fragment_geometry(by_id[f.tensor_id], fragment_id=f.fragment_id,
                                   global_offset=f.global_offset, local_shape=f.local_shape,
                                   nbytes=f.nbytes)


def _check_coverage(tensors, fragments):
    boxes, per_tensor = set(), {}
    for f in fragments:
        box = (f.tensor_id, f.global_offset, f.local_shape)
        if box in boxes:
            raise ValueError(f"duplicate fragment geometry: {f.tensor_id}")
        boxes.add(box)
        per_tensor.setdefault(f.tensor_id, []).append((f.global_offset, f.local_shape))
    for t in tensors:
        mine = per_tensor.get(t.tensor_id, [])
        # Every box is inside the tensor (geometry): equal volume and no overlap is a tiling.
        if sum(prod(s) for _, s in mine) != prod(t.global_shape) or boxes_overlap(mine):
            raise ValueError(f"tensor is not fully covered: {t.tensor_id}")


def _descriptor_key(t):
    return (t.global_shape, t.dtype, t.itemsize, t.shard_dims, t.parallel_axes, t.layer_id,
            t.expert_id, t.layout_fingerprint)


def _check_aliases(tensors, fragments):
    by_id = {t.tensor_id: t for t in tensors}
    groups = {}
    for f in fragments:
        if not f.aliases:
            continue
        unknown = sorted(set(f.aliases) - set(by_id))
        if unknown:
            raise ValueError(f"stored alias references unknown tensor: {unknown[0]}")
        groups.setdefault((f.aliases, f.global_offset, f.local_shape, f.nbytes), []).append(f)
    for (group, *_), members in groups.items():
        ids = {f.tensor_id for f in members}
        if ids != set(group):
            raise ValueError("stored alias group is incomplete for fragment geometry")
        if len({_descriptor_key(by_id[i]) for i in ids}) != 1:
            raise ValueError("stored alias tensor descriptors differ")


def _check_object_ranges(fragments):
    per_object = {}
    for f in fragments:
        per_object.setdefault(f.object_key, []).append(f)
    for key, frags in per_object.items():
        frags.sort(key=lambda f: f.object_offset)
        for a, b in zip(frags, frags[1:]):
            if b.object_offset < a.object_offset + a.nbytes:
                raise ValueError(f"stored fragment object ranges overlap: {a.fragment_id} and "
                                 f"{b.fragment_id} in {key}")
