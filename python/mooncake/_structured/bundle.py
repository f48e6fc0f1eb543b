"""Bundles: a metadata payload and named payloads, published by one manifest.

A bundle is written all or nothing: payloads first, the manifest last; any failure removes what
was written (and the failure is raised, not a cleanup error), so no readable manifest ever
names a missing payload. ``merge`` publishes a new manifest over payloads that already exist
(an appended DataProto stage) and records the superseded control keys for cleanup.
"""

from __future__ import annotations

import contextlib
import ctypes
import io

import numpy as np

from mooncake._structured import _deps, hooks
from mooncake._structured import manifest as mf
from mooncake._structured.keys import BundleKeys, check_chunk_bytes, chunk_keys, object_id_of
from mooncake._structured.transport import PayloadMissingError
from mooncake._structured.model import (
    BundleTransferPolicy, DirectCopyPayload, MultiBufferPayload, RemoteBundleRef,
    TensorObjectBuffer, TensorPayload)


# A payload made of several buffers (the reference's multi-buffer payload); ``Parts(views)``
# is the name our codecs use.
Parts = MultiBufferPayload


def as_view(value, name):
    """A flat byte memoryview of a bytes-like value."""
    if isinstance(value, np.ndarray):
        value = np.ascontiguousarray(value)
        return memoryview(value.reshape(-1).view(np.uint8))
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"bundle buffer {name!r} must be bytes-like, "
                        f"got {type(value).__name__}") from None
    if not view.contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def split_parts(views, chunk_bytes):
    """Chunks of at most ``chunk_bytes``, each a list of sub-views, covering ``views``."""
    chunks, current, room = [], [], chunk_bytes
    for view in views:
        at = 0
        while at < view.nbytes:
            take = min(room, view.nbytes - at)
            current.append(view[at:at + take])
            at += take
            room -= take
            if room == 0:
                chunks.append(current)
                current, room = [], chunk_bytes
    if current:
        chunks.append(current)
    return chunks


class BundleStore:
    def __init__(self, transport, prefix, default_chunk_bytes):
        self.transport = transport
        self.prefix = prefix
        self.default_chunk_bytes = default_chunk_bytes

    # writing

    def _write_payload(self, key, value, chunk_bytes, policy, config, written):
        if isinstance(value, TensorObjectBuffer):
            if value.size <= 0:
                raise ValueError(f"tensor object buffer for {key!r} is empty")
            written.append(key)
            self.transport.write_tensor_object(key, value.ptr, value.size, config)
            return mf.payload_spec(key, [key], [value.size])
        if isinstance(value, TensorPayload):
            return self._write_tensor(key, value.tensor, chunk_bytes, policy, config, written)
        if isinstance(value, DirectCopyPayload):
            return self._write_direct_copy(key, value, chunk_bytes, policy, config, written)
        views = value.buffers if isinstance(value, MultiBufferPayload) else \
            (as_view(value, key),)
        views = tuple(as_view(v, key) for v in views)
        views = tuple(v for v in views if v.nbytes)
        total = sum(v.nbytes for v in views)
        if total == 0:
            return mf.empty_spec(key)
        chunks = split_parts(views, chunk_bytes)
        keys = chunk_keys(key, len(chunks))
        written.extend(keys)
        self.transport.write_chunks(keys, chunks, policy, config)
        return mf.payload_spec(key, keys, [sum(p.nbytes for p in c) for c in chunks])

    def _write_tensor(self, key, tensor, chunk_bytes, policy, config, written):
        """A dense tensor as a store tensor object (the reference's format): ``put_tensor``
        / ``pub_tensor`` where the store has them (``kind: "tensor"``), else its header and
        data as chunks (``metadata_bytes``: the header size, so rows are byte ranges);
        ``torch.save`` bytes (``format: "torch_save"``) for a 0-d tensor or without the
        store's tensor codec."""
        if policy.copy_mode == "zero_copy":
            raise ValueError("zero-copy structured tensor fields require a BufferPool "
                             "tensor-object buffer")
        if policy.copy_mode != "copy":
            written.append(key)
            spec = self.transport.put_tensor(key, tensor, config)
            if spec is not None:
                return spec
            written.pop()
        if not hooks.has_tensor_codec_helpers() or tensor.dim() == 0:
            buf = io.BytesIO()
            _deps.require_torch().save(tensor, buf)
            spec = self._write_payload(key, memoryview(buf.getvalue()), chunk_bytes, policy,
                                       config, written)
            spec["format"] = "torch_save"
            return spec
        from mooncake.store import _serialize_tensor

        header, ptr, nbytes, owner = _serialize_tensor(tensor)
        data = (ctypes.c_uint8 * nbytes).from_address(ptr) if nbytes else b""
        spec = self._write_payload(key, MultiBufferPayload((memoryview(header),
                                                            memoryview(data)), (owner,)),
                                   chunk_bytes, policy, config, written)
        spec["metadata_bytes"] = len(header)
        return spec

    def _write_direct_copy(self, key, value, chunk_bytes, policy, config, written):
        """Flat arrays gathered into pool leases by the native copy, each chunk whole arrays;
        joined and written like bytes without a pool or when an array exceeds a chunk."""
        if policy.copy_mode == "zero_copy":
            raise RuntimeError("zero-copy put requires tensor-object buffers")
        if value.total_bytes == 0:
            return mf.empty_spec(key)
        arrays = value.arrays
        batches = None
        if len(arrays) > 1 and policy.copy_mode != "copy" and self.transport.can_direct_copy():
            batches = self.transport.direct_copy_batches(arrays, chunk_bytes)
        if batches is None:
            flat = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays]
            joined = flat[0] if len(flat) == 1 else np.concatenate(flat)
            return self._write_payload(key, memoryview(joined), chunk_bytes, policy, config,
                                       written)
        keys = chunk_keys(key, len(batches))
        written.extend(keys)
        self.transport.write_direct_copy(keys, arrays, batches, policy, config)
        return mf.payload_spec(key, keys, [b[2] for b in batches])

    def put(self, meta, buffers, partition="default", chunk_bytes=None, policy=None,
            config=None, extra_specs=None):
        """Write ``meta`` and ``buffers`` ({name: value}) as a new bundle; its ref.
        ``extra_specs``: {name: dict} merged into each member's payload spec."""
        keys = BundleKeys(self.prefix, partition)
        chunk = check_chunk_bytes(self.default_chunk_bytes if chunk_bytes is None else chunk_bytes)
        policy = (policy or BundleTransferPolicy()).checked()
        meta_view = as_view(meta, "meta")
        for name in buffers:
            keys.buffer(name)  # validates every name before anything is written
        with self._all_or_nothing() as written:
            specs = {}
            meta_spec = self._write_payload(keys.meta, meta_view, chunk, policy.for_control(),
                                            config, written)
            for name, value in buffers.items():
                spec = self._write_payload(keys.buffer(name), value, chunk, policy, config,
                                           written)
                if extra_specs and name in extra_specs:
                    spec.update(extra_specs[name])
                specs[name] = spec
            manifest = {"version": mf.MANIFEST_VERSION, "layout": "bundle",
                        "object_id": keys.object_id, "meta": meta_spec, "buffers": specs}
            return self._commit(keys, manifest, config, written)

    def merge(self, meta, buffer_specs, partition, cleanup_keys, config=None):
        """A new manifest naming existing payloads (``buffer_specs``) and a new meta payload;
        ``cleanup_keys``: control objects of superseded manifests, removed with this bundle."""
        keys = BundleKeys(self.prefix, partition)
        meta_view = as_view(meta, "meta")
        cleanup = list(dict.fromkeys(cleanup_keys))
        owners = {object_id_of(self.prefix, spec["key"]) for spec in buffer_specs.values()}
        owners.update(object_id_of(self.prefix, k) for k in cleanup)
        owners.add(keys.object_id)
        with self._all_or_nothing() as written:
            meta_spec = self._write_payload(keys.meta, meta_view, max(meta_view.nbytes, 1),
                                            BundleTransferPolicy(copy_mode="copy"), config,
                                            written)
            manifest = {"version": mf.MANIFEST_VERSION, "layout": "bundle",
                        "object_id": keys.object_id, "meta": meta_spec,
                        "buffers": dict(buffer_specs),
                        "buffer_object_ids": sorted(o for o in owners if o)}
            if cleanup:
                manifest["cleanup_keys"] = cleanup
            mf.validate(manifest, self.prefix)
            return self._commit(keys, manifest, config, written)

    # the reference's internal names (code written against its module calls them)

    def put_bundle_manifest(self, meta, buffers, *, partition, chunk_bytes=None, policy=None,
                            cleanup_keys=None, config=None):
        """``merge`` under the reference's name and arguments (``chunk_bytes`` and ``policy``
        are accepted: a manifest update writes only small control objects)."""
        return self.merge(meta, buffers, partition, cleanup_keys or [], config)

    @staticmethod
    def payload_keys(payload_spec):
        return mf.spec_keys(payload_spec)

    def _put_direct_copy_payload(self, key, value, chunk_bytes, transfer_policy, config=None):
        """One DirectCopyPayload written on its own: (payload spec, keys written)."""
        written = []
        with self._all_or_nothing() as written:
            spec = self._write_direct_copy(key, value, check_chunk_bytes(chunk_bytes),
                                           transfer_policy.checked(), config, written)
        return spec, list(written)

    @contextlib.contextmanager
    def _all_or_nothing(self):
        """Yields the list of keys a write makes; any failure removes them and is raised."""
        written = []
        try:
            yield written
        except BaseException:
            self._discard(written)
            raise

    def _commit(self, keys, manifest, config, written):
        """Writes the manifest, last: the bundle is readable only once all it names is."""
        written.append(keys.manifest)
        self.transport.put_blob(keys.manifest, mf.encode_json(manifest, "bundle manifest"),
                                config)
        return RemoteBundleRef(manifest_key=keys.manifest, manifest=manifest)

    def _discard(self, keys):
        try:
            self.transport.remove_keys(keys, strict=False)
        except Exception:  # the write's own error is the one to report
            pass

    # reading

    def resolve(self, ref):
        """The validated manifest of a ref (a RemoteBundleRef or {"manifest_key": ...})."""
        if isinstance(ref, RemoteBundleRef):
            key, manifest = ref.manifest_key, ref.manifest
        elif hasattr(ref, "get"):
            key, manifest = ref.get("manifest_key"), ref.get("manifest")
        else:
            raise TypeError(f"expected a RemoteBundleRef or a mapping, got {type(ref).__name__}")
        if not manifest:
            if not isinstance(key, str) or not key:
                raise ValueError("bundle ref must include manifest_key")
            manifest = mf.decode_json(self.transport.get_blob(key, "bundle manifest"),
                                      "bundle manifest")
        mf.validate(manifest, self.prefix)
        self.manifest_key(ref, manifest)
        return manifest

    def manifest_key(self, ref, manifest):
        expected = f"{self.prefix}/{manifest['object_id']}/manifest"
        key = ref.manifest_key if isinstance(ref, RemoteBundleRef) else ref.get("manifest_key")
        if key is not None and key != expected:
            raise mf.ManifestError("bundle manifest_key does not match manifest object_id")
        return expected

    def metadata(self, manifest):
        return mf.decode_json(self.transport.read_bytes(manifest["meta"]),
                              "structured metadata")

    def remove(self, ref):
        manifest = self.resolve(ref)
        keys = [*mf.manifest_keys(manifest), *manifest.get("cleanup_keys", []),
                self.manifest_key(ref, manifest)]
        self.transport.remove_keys(keys, strict=True)

    def remove_keys(self, keys, strict=False):
        self.transport.remove_keys(keys, strict=strict)


__all__ = ["BundleStore", "Parts", "PayloadMissingError", "as_view", "split_parts"]
