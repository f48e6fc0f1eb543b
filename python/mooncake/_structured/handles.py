"""DataProto ref handles: the JSON-safe form of a ``MooncakeDataProtoRef`` that crosses process
boundaries (an RPC argument, a queue message). A handle names manifest keys only; the reader
fetches manifests from the store.

::

    {"type": "mooncake_dataproto_ref", "version": 1, "kind": "bundle_stages",
     "batch_size": 128, "namespace": "...", "partition": "...", "global_indexes": null,
     "stage_refs": {"<stage>": {"manifest_key": "..."}},
     "field_index": {"<field>": {"stage": "...", "member": "...", "section": "batch"}},
     "meta_info": {...}, "encoded_non_tensor": {...}, "storage_group_id": "..."}

Version 2 is read too (it requires ``storage_group_id``); unknown top-level keys are ignored.
"""

from __future__ import annotations

import json

import numpy as np

from mooncake._structured.model import MooncakeDataProtoRef, RemoteBundleRef, \
    StructuredFieldLocation

HANDLE_TYPE = "mooncake_dataproto_ref"
HANDLE_VERSION = 1
HANDLE_KIND = "bundle_stages"
SECTIONS = ("batch", "non_tensor_batch")


def is_dataproto_ref_handle(value):
    """True for a mapping that is a DataProto ref handle."""
    return hasattr(value, "get") and hasattr(value, "items") and value.get("type") == HANDLE_TYPE


def json_safe(value, what="DataProto ref handles"):
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return [json_safe(v, what) for v in value.tolist()]
        return value.tolist()
    if hasattr(value, "items"):
        return {str(k): json_safe(v, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, what) for v in value]
    raise TypeError(f"{what} support only JSON-safe values, got {type(value).__name__}")


def export_dataproto_ref(ref):
    """A JSON-safe handle of ``ref`` (manifest keys, no manifests)."""
    if not isinstance(ref, MooncakeDataProtoRef):
        raise TypeError(f"expected MooncakeDataProtoRef, got {type(ref).__name__}")
    handle = {
        "type": HANDLE_TYPE,
        "version": HANDLE_VERSION,
        "kind": HANDLE_KIND,
        "batch_size": int(ref.batch_size),
        "namespace": ref.namespace,
        "partition": ref.partition,
        "global_indexes": json_safe(ref.global_indexes),
        "stage_refs": {stage: {"manifest_key": sref.manifest_key}
                       for stage, sref in ref.stage_refs.items()},
        "field_index": {name: {"stage": loc.stage, "member": loc.member,
                               "section": loc.section}
                        for name, loc in ref.field_index.items()},
        "meta_info": json_safe(ref.meta_info),
        "encoded_non_tensor": json_safe(ref.encoded_non_tensor),
    }
    if ref._storage_group_id is not None:
        handle["storage_group_id"] = ref._storage_group_id
    json.dumps(handle, ensure_ascii=False)
    return handle


def _mapping(value, what):
    if not hasattr(value, "items") or not hasattr(value, "get"):
        raise ValueError(f"DataProto ref handle {what} must be a mapping")
    return value


def _name(value):
    return isinstance(value, str) and bool(value)


def import_dataproto_ref(handle):
    """The ``MooncakeDataProtoRef`` of a handle (manifests are fetched lazily)."""
    if not is_dataproto_ref_handle(handle):
        raise ValueError("not a Mooncake DataProto ref handle")
    try:
        version = int(handle.get("version", -1))
    except (TypeError, ValueError):
        version = -1
    if version not in (1, 2):
        raise ValueError(f"unsupported DataProto ref handle version: {handle.get('version')!r}")
    if handle.get("kind") != HANDLE_KIND:
        raise ValueError(f"unsupported DataProto ref handle kind: {handle.get('kind')!r}")
    batch_size = handle.get("batch_size")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 0:
        raise ValueError("DataProto ref handle batch_size must be a non-negative integer")
    stage_refs = {}
    for stage, raw in _mapping(handle.get("stage_refs"), "stage_refs").items():
        key = _mapping(raw, f"stage_refs[{stage!r}]").get("manifest_key")
        if not _name(stage) or not _name(key):
            raise ValueError("DataProto ref handle stage refs must contain non-empty string "
                             "names and manifest_key values")
        stage_refs[stage] = RemoteBundleRef(manifest_key=key, manifest={})
    field_index = {}
    for name, raw in _mapping(handle.get("field_index"), "field_index").items():
        loc = _mapping(raw, f"field_index[{name!r}]")
        section = loc.get("section")
        if section not in SECTIONS:
            raise ValueError(f"invalid DataProto field section: {section!r}")
        stage, member = loc.get("stage"), loc.get("member")
        if not (_name(name) and _name(stage) and _name(member)):
            raise ValueError("DataProto ref handle field locations must be non-empty strings")
        if stage not in stage_refs:
            raise ValueError(f"DataProto ref handle field {name!r} references unknown stage "
                             f"{stage!r}")
        field_index[name] = StructuredFieldLocation(stage, member, section)
    group = handle.get("storage_group_id")
    if (version == 2 and group is None) or (group is not None and not _name(group)):
        raise ValueError("DataProto ref handle has invalid storage_group_id")
    indexes = handle.get("global_indexes")
    if indexes is not None:
        if not isinstance(indexes, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in indexes):
            raise ValueError("DataProto ref handle global_indexes must be a list of integers "
                             "or null")
        indexes = list(indexes)
    encoded = dict(_mapping(handle.get("encoded_non_tensor", {}), "encoded_non_tensor"))
    for name, enc in encoded.items():
        if name not in field_index or not hasattr(enc, "get") or \
                not hasattr(enc.get("payload_members"), "items"):
            raise ValueError(f"DataProto ref handle encoded_non_tensor[{name!r}] is invalid")
    return MooncakeDataProtoRef(
        batch_size=batch_size,
        stage_refs=stage_refs,
        field_index=field_index,
        meta_info=dict(_mapping(handle.get("meta_info", {}), "meta_info")),
        namespace=str(handle.get("namespace", "default")),
        partition=str(handle.get("partition", "default")),
        global_indexes=indexes,
        encoded_non_tensor=encoded,
        _storage_group_id=group,
    )


def resolve_ref(ref):
    if isinstance(ref, MooncakeDataProtoRef):
        return ref
    if is_dataproto_ref_handle(ref):
        return import_dataproto_ref(ref)
    raise TypeError(f"expected MooncakeDataProtoRef or DataProto handle, got "
                    f"{type(ref).__name__}")
