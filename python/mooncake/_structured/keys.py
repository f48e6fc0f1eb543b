"""Where a bundle's objects live in the store.

A bundle ``<prefix>/<partition>/<uuid>`` (its *object id* is ``<partition>/<uuid>``) owns:

- ``<base>/manifest``: the JSON manifest, written last (a bundle is readable only once all of
  its payloads are in the store);
- ``<base>/meta``: the metadata payload;
- ``<base>/buffer/<name>``: one payload per member, or ``.../chunk/<i>`` when split.
"""

from __future__ import annotations

import uuid


def normalize_prefix(key_prefix):
    if not isinstance(key_prefix, str):
        raise ValueError("key_prefix must be a non-empty key prefix")
    prefix = key_prefix.strip("/")
    if not prefix or any(ord(ch) < 32 for ch in prefix):
        raise ValueError("key_prefix must be a non-empty key prefix")
    return prefix


def check_segment(value, what):
    """A name used as one key segment: a non-empty string without '/' or control characters."""
    if (not isinstance(value, str) or not value or "/" in value
            or any(ord(ch) < 32 for ch in value)):
        raise ValueError(f"invalid bundle {what}: {value!r}")
    return value


def check_chunk_bytes(chunk_bytes):
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be positive")
    return chunk_bytes


class BundleKeys:
    """The keys of one new bundle."""

    def __init__(self, prefix, partition):
        check_segment(partition, "partition")
        self.object_id = f"{partition}/{uuid.uuid4().hex}"
        self.base = f"{prefix}/{self.object_id}"
        self.manifest = f"{self.base}/manifest"
        self.meta = f"{self.base}/meta"

    def buffer(self, name):
        return f"{self.base}/buffer/{check_segment(name, 'buffer name')}"


def chunk_keys(key, count):
    return [key] if count == 1 else [f"{key}/chunk/{i}" for i in range(count)]


def object_id_of(prefix, key):
    """The object id a key of this prefix belongs to, or None."""
    head = f"{prefix}/"
    if not isinstance(key, str) or not key.startswith(head):
        return None
    rest = key[len(head):]
    for tail in ("/manifest", "/meta"):
        if rest.endswith(tail):
            return rest[: -len(tail)] or None
    for marker in ("/meta/", "/buffer/"):
        at = rest.find(marker)
        if at > 0:
            return rest[:at]
    return None
