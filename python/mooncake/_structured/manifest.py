"""The bundle manifest: a JSON object naming every store key of a bundle.

::

    {"version": 1, "layout": "bundle", "object_id": "<partition>/<uuid>",
     "meta": <payload spec>, "buffers": {"<name>": <payload spec>, ...},
     "buffer_object_ids": [...], "cleanup_keys": [...]}     # the last two: merged stages

A payload spec is ``{"key": k, "bytes": n, "chunks": [{"key": k or k/chunk/i, "bytes": m}]}``
(chunk bytes sum to n; an empty payload has no chunk and no store object), plus what its
encoding needs. A manifest read back is validated before any key in it is touched: every key
must lie inside the bundle's own namespace (or a merged stage's), so a tampered manifest can
neither read nor delete foreign objects.
"""

from __future__ import annotations

import json

MANIFEST_VERSION = 1
FIELD_SPECS_KEY = "__mooncake_structured_fields__"


class ManifestError(ValueError):
    """A manifest or metadata blob that is not what this module wrote."""


def encode_json(value, label):
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise TypeError(f"{label} must be JSON-serializable: {error}") from error


def decode_json(blob, label):
    try:
        value = json.loads(bytes(blob).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ManifestError(f"{label} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise ManifestError(f"{label} must decode to a dict")
    return value


def empty_spec(key):
    return {"key": key, "bytes": 0, "chunks": []}


def payload_spec(key, chunk_keys, chunk_sizes):
    return {"key": key, "bytes": int(sum(chunk_sizes)),
            "chunks": [{"key": k, "bytes": int(n)} for k, n in zip(chunk_keys, chunk_sizes)]}


def spec_keys(spec):
    return [chunk["key"] for chunk in spec["chunks"]]


def manifest_keys(manifest):
    """Every payload key the manifest names (meta first), without cleanup keys."""
    return [k for spec in (manifest["meta"], *manifest["buffers"].values()) for k in spec_keys(spec)]


def _int(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(f"bundle {what} must be an integer")
    return value


def validate_spec(spec, bases):
    if not isinstance(spec, dict):
        raise ManifestError("bundle payload spec must be a dict")
    key = spec.get("key")
    if not isinstance(key, str) or not any(key.startswith(f"{b}/") for b in bases):
        raise ManifestError("bundle payload key is outside the bundle namespace")
    total = _int(spec.get("bytes", -1), "payload bytes")
    if total < 0:
        raise ManifestError("bundle payload bytes must be non-negative")
    chunks = spec.get("chunks")
    if not isinstance(chunks, list) or (total and not chunks):
        raise ManifestError("bundle payload chunks are invalid")
    seen, got = set(), 0
    for chunk in chunks:
        if not isinstance(chunk, dict):
            raise ManifestError("bundle chunk must be a dict")
        ckey = chunk.get("key")
        if not isinstance(ckey, str) or (ckey != key and not ckey.startswith(f"{key}/")):
            raise ManifestError("bundle chunk key is outside the payload namespace")
        if ckey in seen:
            raise ManifestError("bundle chunk keys must be unique")
        size = _int(chunk.get("bytes", -1), "chunk bytes")
        if size <= 0:
            raise ManifestError("bundle chunk bytes must be positive")
        seen.add(ckey)
        got += size
    if got != total:
        raise ManifestError(f"bundle payload chunks total {got} bytes, expected {total}")


def validate(manifest, prefix):
    """Raise ManifestError unless ``manifest`` is a well-formed bundle manifest of ``prefix``."""
    if not isinstance(manifest, dict):
        raise ManifestError("invalid bundle manifest")
    if manifest.get("version") != MANIFEST_VERSION or manifest.get("layout") != "bundle":
        raise ManifestError("invalid bundle manifest")
    object_id = manifest.get("object_id")
    if not isinstance(object_id, str) or not object_id:
        raise ManifestError("bundle manifest object_id must be a string")
    owners = manifest.get("buffer_object_ids", [object_id])
    if not isinstance(owners, list) or not all(isinstance(o, str) and o for o in owners):
        raise ManifestError("bundle manifest buffer_object_ids must be a list of strings")
    bases = [f"{prefix}/{o}" for o in owners]
    validate_spec(manifest.get("meta"), [f"{prefix}/{object_id}"])
    cleanup = manifest.get("cleanup_keys", [])
    if not isinstance(cleanup, list) or not all(
            isinstance(k, str) and any(k.startswith(f"{b}/") for b in bases) for k in cleanup):
        raise ManifestError("bundle manifest cleanup_keys are outside the bundle namespace")
    buffers = manifest.get("buffers")
    if not isinstance(buffers, dict):
        raise ManifestError("bundle manifest buffers must be a dict")
    from mooncake._structured.keys import check_segment

    for name, spec in buffers.items():
        try:
            check_segment(name, "buffer name")
        except ValueError as error:
            raise ManifestError(str(error)) from None
        validate_spec(spec, bases)
    return manifest


def field_specs(metadata):
    specs = metadata.get(FIELD_SPECS_KEY, {})
    if not isinstance(specs, dict):
        raise ManifestError("structured field specs must be a dict")
    return specs
