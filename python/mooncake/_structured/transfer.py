"""``MooncakeBundleTransfer``: bundles, structured objects and DataProto stages over one store."""

from __future__ import annotations

import uuid

import numpy as np

from mooncake._structured import _deps
from mooncake._structured import codecs as cd
from mooncake._structured import dataproto as dp
from mooncake._structured import manifest as mf
from mooncake._structured.bundle import BundleStore, as_view
from mooncake._structured.handles import resolve_ref
from mooncake._structured.keys import check_chunk_bytes, normalize_prefix
from mooncake._structured.members import MemberReader, encode_members
from mooncake._structured.transport import Transport, config_with_group, single_group_id
from mooncake._structured.model import (
    DEFAULT_BUNDLE_CHUNK_BYTES, BundleTransferPolicy, MooncakeDataProtoRef, RemoteBundleRef,
    StructuredFieldLocation, StructuredObjectPayload, StructuredObjectReadSpec,
    StructuredObjectResult, TensorObjectBuffer, TensorPayload, MultiBufferPayload,
    DirectCopyPayload)

WRAPPED_KEY = "__mooncake_wrapped_object__"
# Values a bundle member is written from as they are (anything else: as bytes).
PAYLOAD_TYPES = (TensorObjectBuffer, TensorPayload, MultiBufferPayload, DirectCopyPayload)


class _StageView:
    """One stage's manifest and metadata, fetched once per read."""

    def __init__(self, bundles, ref):
        self.manifest = bundles.resolve(ref)
        self.metadata = bundles.metadata(self.manifest)
        self.specs = mf.field_specs(self.metadata)

    def member(self, name):
        buffers = self.manifest["buffers"]
        if name not in buffers:
            raise KeyError(f"unknown bundle buffers: {[name]}")
        return buffers[name], self.specs.get(name, {"encoding": "bytes"})


class _StoreRows(cd.RowSource):
    """The payloads of one encoded field, read from the store as the decoder asks."""

    def __init__(self, transfer, stage, members, all_rows):
        self.t, self.stage, self.members, self.all_rows = transfer, stage, members, all_rows
        self.cache = {}

    def _spec(self, name):
        if name not in self.members:
            raise mf.ManifestError(f"encoded field has no {name!r} payload")
        return self.stage.member(self.members[name])

    def array(self, name):
        if name not in self.cache:
            spec, field = self._spec(name)
            self.cache[name] = self.t._reader.read(self.members[name], spec, field)
        return self.cache[name]

    def rows_of(self, name, rows):
        spec, field = self._spec(name)
        return self.t._reader.read(self.members[name], spec, field, rows=list(rows))

    def ranges(self, name, spans):
        spec, _ = self._spec(name)
        transport = self.t._transport
        if self.all_rows:
            data = memoryview(transport.read_bytes(spec))
            return [data[a:b] for a, b in spans]
        for a, b in spans:
            if b > spec["bytes"] or a < 0:
                raise mf.ManifestError(f"encoded field offsets point past its data "
                                       f"({b} > {spec['bytes']} bytes)")
        buf = np.empty(sum(b - a for a, b in spans), dtype=np.uint8)
        base, at, ranges, out = int(buf.ctypes.data), 0, [], []
        view = memoryview(buf)
        for a, b in spans:
            ranges.append((a, b - a, base + at))
            out.append(view[at:at + b - a])
            at += b - a
        transport.read_ranges(spec, ranges)
        return out


class MooncakeBundleTransfer:
    """Moves structured objects and DataProto stages through a Mooncake store.

    ``store``: a set-up ``MooncakeDistributedStore`` (or any object with its ``put`` / ``get``
    / ``remove`` and optionally ``batch_put_from``, ``get_into``, ``get_into_ranges``,
    ``batch_remove``, ``put_tensor_from``). ``key_prefix``: the first segment of every key
    written. ``default_chunk_bytes``: payloads are split into objects of at most this size.
    """

    def __init__(self, store, key_prefix="bundle", default_chunk_bytes=DEFAULT_BUNDLE_CHUNK_BYTES,
                 buffer_pool=None):
        self.store = store
        self.key_prefix = normalize_prefix(key_prefix)
        self.default_chunk_bytes = check_chunk_bytes(default_chunk_bytes)
        self._transport = Transport(store, buffer_pool)
        self._bundles = BundleStore(self._transport, self.key_prefix, self.default_chunk_bytes)
        self._reader = MemberReader(self._transport, buffer_pool)

    @property
    def _bundle_store(self):
        """The bundle layer under the reference's name (its tests and tools reach into it)."""
        return self._bundles

    # -- bundles -------------------------------------------------------------------------------

    def put_bundle(self, meta, buffers, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """Store raw metadata bytes plus named bytes-like buffers; the bundle's ref."""
        policy = (policy or BundleTransferPolicy()).checked(max_inflight_put)
        values = {}
        for name, value in buffers.items():
            values[name] = value if isinstance(value, PAYLOAD_TYPES) else as_view(value, name)
        return self._bundles.put(meta, values, partition, chunk_bytes, policy, config)

    def remove_bundle(self, ref):
        """Remove every store object of a bundle (a missing one is fine; others raise)."""
        self._bundles.remove(ref)

    # -- structured objects --------------------------------------------------------------------

    def put_structured_object(self, payload, partition="default", chunk_bytes=None, policy=None,
                              max_inflight_put=None, config=None):
        """Store a ``StructuredObjectPayload``; its ref."""
        if not isinstance(payload, StructuredObjectPayload):
            raise TypeError(f"expected StructuredObjectPayload, got {type(payload).__name__}")
        policy = (policy or BundleTransferPolicy()).checked(max_inflight_put)
        metadata, values = encode_members(payload.metadata, payload.buffers)
        if policy.copy_mode == "zero_copy":
            plain = [n for n, v in payload.buffers.items() if _deps.is_tensor(v)]
            if plain:
                raise ValueError("zero-copy structured tensor fields require a BufferPool "
                                 "tensor-object buffer (tensor_object_buffer), got plain "
                                 f"tensors {plain}")
        meta = mf.encode_json(metadata, "structured metadata")
        return self._bundles.put(meta, values, partition, chunk_bytes, policy, config)

    def put_object(self, obj, partition="default", chunk_bytes=None, policy=None,
                   max_inflight_put=None, config=None):
        """Store a mapping of members, or one array / tensor (read back by get_object)."""
        if hasattr(obj, "items") and not isinstance(obj, np.ndarray) and not _deps.is_tensor(obj):
            payload = StructuredObjectPayload(metadata={}, buffers=dict(obj.items()))
        else:
            payload = StructuredObjectPayload(metadata={WRAPPED_KEY: True}, buffers={"value": obj})
        return self.put_structured_object(payload, partition, chunk_bytes, policy,
                                          max_inflight_put, config)

    def get_object(self, ref):
        result = self.materialize(self.read_spec(ref))
        if result.metadata.get(WRAPPED_KEY):
            return result.objects["value"]
        return result.objects

    def read_spec(self, ref):
        return StructuredObjectReadSpec(ref=ref)

    def materialize(self, spec):
        return self.materialize_into(spec, None)

    def materialize_into(self, spec, destinations):
        """Read the members of ``spec``; ``destinations`` ({member: ndarray, tensor,
        raw_destination or tensor_object_buffer}) are filled in place and returned."""
        if not isinstance(spec, StructuredObjectReadSpec):
            raise TypeError(f"expected StructuredObjectReadSpec, got {type(spec).__name__}")
        if spec.member_names is not None and not spec.member_names:
            raise ValueError("structured read spec selected no members")
        stage = _StageView(self._bundles, spec.ref)
        buffers = stage.manifest["buffers"]
        names = list(buffers) if spec.member_names is None else list(spec.member_names)
        missing = [n for n in names if n not in buffers]
        if missing:
            raise KeyError(f"unknown bundle buffers: {missing}")
        destinations = dict(destinations or {})
        stray = sorted(set(destinations) - set(names))
        if stray:
            raise KeyError(f"destinations name members that are not read: {stray}")
        slices = dict(spec.member_slices)
        objects = {}
        for name in names:
            pspec, fspec = stage.member(name)
            objects[name] = self._reader.read(name, pspec, fspec, member_slice=slices.get(name),
                                              destination=destinations.get(name))
        return StructuredObjectResult(metadata=dict(stage.metadata), objects=objects)

    @staticmethod
    def release_result(result):
        """Release the buffer-pool leases behind a result (its arrays, in dicts, lists, tuples
        and object arrays, at any depth) now instead of at garbage collection. Only with a
        ``buffer_pool``: ndarray members read without a destination are pool-backed. The arrays
        must not be used afterwards."""
        seen = set()

        def visit(value):
            owner = getattr(value, "_mooncake_pool_owner", None)
            if owner is not None:
                if id(owner) not in seen:
                    seen.add(id(owner))
                    owner.release()
                return
            if id(value) in seen:
                return
            if hasattr(value, "values") and callable(value.values) and hasattr(value, "items"):
                seen.add(id(value))
                for item in value.values():
                    visit(item)
            elif isinstance(value, (list, tuple)):
                seen.add(id(value))
                for item in value:
                    visit(item)
            elif isinstance(value, np.ndarray) and value.dtype.hasobject:
                seen.add(id(value))
                for item in value.flat:
                    visit(item)

        visit(result)

    # -- DataProto -----------------------------------------------------------------------------

    def put(self, data, *, type="dataproto", namespace="default", partition="default",
            stage="default", chunk_bytes=None, policy=None, config=None, field_schemas=None):
        """Store a DataProto-like value (``type="dataproto"``) or a flat dict (``"dict"``)."""
        if type == "dataproto":
            stage_data = data
        elif type == "dict":
            stage_data = dp.flat_to_envelope(data, field_schemas)
        else:
            raise ValueError(f"unsupported Mooncake payload type: {type!r}")
        return self._put_stage(None, stage_data, namespace=namespace, partition=partition,
                               stage=stage, chunk_bytes=chunk_bytes, policy=policy,
                               overwrite=False, schemas=field_schemas, config=config)

    def get(self, ref, *, type="dataproto", fields=None, batch_fields=None,
            non_tensor_fields=None, meta_info_keys=None, data_cls=None, destinations=None,
            rows=None):
        if type not in ("dataproto", "dict"):
            raise ValueError(f"unsupported Mooncake payload type: {type!r}")
        flat = type == "dict"
        result = self._get(ref, fields, batch_fields, non_tensor_fields, meta_info_keys,
                           dict if flat else data_cls, destinations, rows, flat)
        return dp.envelope_to_flat(result) if flat else result

    def put_dataproto(self, data, *, namespace="default", partition="default", stage="default",
                      chunk_bytes=None, policy=None, field_schemas=None, config=None):
        """Store a DataProto-like value as one stage; its ``MooncakeDataProtoRef``."""
        return self.put(data, type="dataproto", namespace=namespace, partition=partition,
                        stage=stage, chunk_bytes=chunk_bytes, policy=policy,
                        field_schemas=field_schemas, config=config)

    def append_dataproto_fields(self, ref, data, *, stage, overwrite=False, chunk_bytes=None,
                                policy=None, field_schemas=None, config=None):
        """Add fields (as stage ``stage``) to a ref or handle; a new ref. Existing payloads are
        not rewritten; ``overwrite`` replaces a whole existing stage."""
        ref = resolve_ref(ref)
        return self._put_stage(ref, data, namespace=ref.namespace, partition=ref.partition,
                               stage=stage, chunk_bytes=chunk_bytes, policy=policy,
                               overwrite=overwrite, schemas=field_schemas, config=config)

    def get_dataproto(self, ref, *, fields=None, batch_fields=None, non_tensor_fields=None,
                      meta_info_keys=None, data_cls=None, destinations=None, rows=None):
        """Materialize selected fields and rows of a ref or handle."""
        return self._get(ref, fields, batch_fields, non_tensor_fields, meta_info_keys, data_cls,
                         destinations, rows, False)

    def cleanup_dataproto(self, ref):
        """Remove every stage object of a ref or handle."""
        ref = resolve_ref(ref)
        done = set()
        for stage_ref in ref.stage_refs.values():
            if stage_ref.manifest_key not in done:
                done.add(stage_ref.manifest_key)
                self.remove_bundle(stage_ref)

    def dataproto_manifest_view(self, ref):
        """Per-field layout (section, stage, member, spec) read from the stage manifests."""
        ref = resolve_ref(ref)
        stages = {s: _StageView(self._bundles, r) for s, r in ref.stage_refs.items()}
        fields = {}
        for name, loc in ref.field_index.items():
            view = stages[loc.stage]
            enc = ref.encoded_non_tensor.get(name)
            if enc is not None:
                spec = {"encoding": "structured_non_tensor", "codec": enc["codec"],
                        "metadata": enc.get("metadata"),
                        "payload_members": dict(enc["payload_members"]),
                        "payload_specs": {p: dict(view.specs.get(m, {"encoding": "bytes"}))
                                          for p, m in enc["payload_members"].items()}}
            else:
                spec = dict(view.specs.get(loc.member, {"encoding": "bytes"}))
            fields[name] = {"section": loc.section, "stage": loc.stage, "member": loc.member,
                            "spec": spec}
        return {
            "namespace": ref.namespace, "partition": ref.partition, "batch_size": ref.batch_size,
            "batch_fields": {n: f for n, f in fields.items() if f["section"] == "batch"},
            "non_tensor_fields": {n: f for n, f in fields.items()
                                  if f["section"] == "non_tensor_batch"},
            "meta_info_keys": list(ref.meta_info),
            "stages": {s: {"manifest_key": r.manifest_key,
                           "dataproto": stages[s].metadata.get("dataproto", {})}
                       for s, r in ref.stage_refs.items()},
        }

    # -- DataProto internals -------------------------------------------------------------------

    @staticmethod
    def _new_group_id(config):
        gid = single_group_id(config)
        if gid is None:
            return f"structured-{uuid.uuid4().hex}"
        return gid or None

    def _encode_stage_fields(self, stage, batch, non_tensor, schemas):
        members, locations, encoded = {}, {}, {}
        for name, value in batch.items():
            dp.check_batch_value(name, value)
            member = f"batch.{name}"
            members[member] = value
            locations[name] = StructuredFieldLocation(stage, member, "batch")
        for name, value in non_tensor.items():
            path = f"non_tensor_batch.{name}"
            schema = dp.schema_for(schemas, name, "non_tensor_batch")
            rows = dp.as_rows(name, value)
            enc = None
            if schema is not None and schema.codec != "auto":
                codec = dp.SCHEMA_ALIASES.get(schema.codec, schema.codec)
                try:
                    if codec == "ndarray" and not rows.dtype.hasobject:
                        dtype = dp.schema_dtype(schema)
                        rows = rows if dtype is None else rows.astype(dtype)
                        if not schema.nullable:
                            pass
                    else:
                        enc = cd.encode(path, rows, codec, dtype_hint=dp.schema_dtype(schema),
                                        nullable=schema.nullable, options=schema.metadata)
                except (TypeError, ValueError, AttributeError) as error:
                    raise type(error)(f"failed to encode non_tensor_batch field {name!r} with "
                                      f"FieldSchema codec {schema.codec!r}: {error}") from error
            elif rows.dtype.hasobject:
                nullable = schema.nullable if schema is not None else True
                enc = cd.encode(path, rows, None, nullable=nullable)
            elif rows.ndim == 0:
                raise ValueError(f"non_tensor_batch field {name!r} has no batch dimension")
            if enc is None:
                members[path] = rows
                locations[name] = StructuredFieldLocation(stage, path, "non_tensor_batch")
                continue
            payload_members = {}
            for part, part_value in enc.payload.items():
                member = f"{path}.{part}"
                members[member] = part_value
                payload_members[part] = member
            locations[name] = StructuredFieldLocation(stage, path, "non_tensor_batch")
            encoded[name] = {"codec": enc.codec, "rows": enc.rows, "metadata": enc.metadata,
                             "payload_members": payload_members}
        return members, locations, encoded

    def _put_stage(self, ref, data, *, namespace, partition, stage, chunk_bytes, policy,
                   overwrite, schemas, config):
        if not isinstance(stage, str) or not stage:
            raise ValueError(f"DataProto stage must be a non-empty string, got {stage!r}")
        batch, non_tensor, meta_info = dp.split(data)
        dp.check_schema_sections(batch, non_tensor, meta_info, schemas)
        rows = dp.batch_size(batch, non_tensor)
        if ref is not None and (batch or non_tensor) and rows != ref.batch_size:
            raise ValueError(f"DataProto append batch size {rows} does not match ref batch size "
                             f"{ref.batch_size}")
        overlap = sorted(set(batch) & set(non_tensor))
        if overlap:
            raise ValueError(f"DataProto batch and non_tensor_batch fields overlap: {overlap}")
        from mooncake._structured.handles import json_safe

        json_safe(meta_info, "DataProto meta_info")  # refused before anything is written
        members, locations, encoded = self._encode_stage_fields(stage, batch, non_tensor, schemas)
        if ref is not None:
            dup = sorted(set(ref.field_index) & set(locations))
            if dup and not overwrite:
                raise ValueError(f"DataProto fields already exist: {dup}")
            if overwrite:
                dangling = sorted(n for n, loc in ref.field_index.items()
                                  if loc.stage == stage and n not in locations)
                if dangling:
                    raise ValueError(f"DataProto overwrite for stage {stage!r} must include "
                                     f"existing fields: {dangling}")
                moved = sorted(n for n in dup if ref.field_index[n].stage != stage)
                if moved:
                    raise ValueError(f"DataProto overwrite cannot move fields of other stages "
                                     f"into stage {stage!r}: {moved}")
            group = ref._storage_group_id
            if group is not None:
                current = single_group_id(config)
                if current and current != group:
                    raise ValueError("config.group_ids conflicts with the DataProto storage "
                                     "group")
        else:
            group = self._new_group_id(config)
        if not members:
            if ref is None:
                return MooncakeDataProtoRef(rows, {}, {}, dict(meta_info), namespace, partition,
                                            None, {}, group)
            merged_meta = {**ref.meta_info, **meta_info}
            return MooncakeDataProtoRef(ref.batch_size, dict(ref.stage_refs),
                                        dict(ref.field_index), merged_meta, ref.namespace,
                                        ref.partition, ref.global_indexes,
                                        dict(ref.encoded_non_tensor), group)
        effective = config if group is None else config_with_group(config, group)
        payload = StructuredObjectPayload(
            metadata={"layout": "dataproto_stage",
                      "dataproto": {"version": 1, "namespace": namespace,
                                    "partition": partition, "stage": stage,
                                    "batch_size": rows}},
            buffers=members)
        existing = ref.stage_refs.get(stage) if ref is not None else None
        if existing is not None and not overwrite:
            stage_ref = self._append_to_stage(existing, payload, partition, chunk_bytes, policy,
                                              effective)
        else:
            stage_ref = self.put_structured_object(payload, partition, chunk_bytes, policy,
                                                   config=effective)
            if existing is not None:
                self.remove_bundle(existing)
        if ref is None:
            return MooncakeDataProtoRef(rows, {stage: stage_ref}, locations, dict(meta_info),
                                        namespace, partition, None, encoded, group)
        index = dict(ref.field_index)
        index.update(locations)
        enc = {n: e for n, e in ref.encoded_non_tensor.items() if n not in locations}
        enc.update(encoded)
        return MooncakeDataProtoRef(ref.batch_size, {**ref.stage_refs, stage: stage_ref}, index,
                                    {**ref.meta_info, **meta_info}, namespace, partition,
                                    ref.global_indexes, enc, group)

    def _append_to_stage(self, old_ref, payload, partition, chunk_bytes, policy, config):
        """Write the new members, then one manifest naming old and new payloads."""
        new_ref = self.put_structured_object(payload, partition, chunk_bytes, policy,
                                             config=config)
        try:
            old = _StageView(self._bundles, old_ref)
            new = _StageView(self._bundles, new_ref)
            if old.metadata.get("dataproto") != new.metadata.get("dataproto"):
                raise ValueError("DataProto stage metadata mismatch during manifest merge")
            clash = sorted(set(old.manifest["buffers"]) & set(new.manifest["buffers"]))
            if clash:
                raise ValueError(f"structured members already exist: {clash}")
            metadata = dict(old.metadata)
            metadata[mf.FIELD_SPECS_KEY] = {**old.specs, **new.specs}
            buffers = {**old.manifest["buffers"], **new.manifest["buffers"]}
            old_key = self._bundles.manifest_key(old_ref, old.manifest)
            new_key = self._bundles.manifest_key(new_ref, new.manifest)
            cleanup = [*old.manifest.get("cleanup_keys", []), old_key,
                       *mf.spec_keys(old.manifest["meta"]), new_key,
                       *mf.spec_keys(new.manifest["meta"])]
            merged = self._bundles.merge(mf.encode_json(metadata, "structured metadata"),
                                         buffers, partition, cleanup, config)
        except BaseException:
            self._bundles.remove(new_ref)
            raise
        self._bundles.remove_keys([new_key, *mf.spec_keys(new.manifest["meta"])])
        return merged

    def _get(self, ref, fields, batch_fields, non_tensor_fields, meta_info_keys, data_cls,
             destinations, rows, flat):
        ref = resolve_ref(ref)
        selection = dp.row_selection(rows, ref.batch_size)
        batch_names, nt_names = dp.select_fields(ref, fields, batch_fields, non_tensor_fields)
        destinations = dict(destinations or {})
        stray = sorted(set(destinations) - set(batch_names) - set(nt_names))
        if stray:
            raise KeyError(f"destinations name fields that are not read: {stray}")
        if isinstance(meta_info_keys, str):
            raise TypeError("meta_info_keys must be a sequence of names, not a string")
        stages = {}

        def stage_view(name):
            if name not in stages:
                stages[name] = _StageView(self._bundles, ref.stage_refs[name])
            return stages[name]

        row_list = None if selection is None else selection.row_list(ref.batch_size)
        batch, non_tensor = {}, {}
        for name in [*batch_names, *nt_names]:
            loc = ref.field_index[name]
            view = stage_view(loc.stage)
            out = batch if loc.section == "batch" else non_tensor
            enc = ref.encoded_non_tensor.get(name) if loc.section == "non_tensor_batch" else None
            if enc is not None:
                if name in destinations:
                    raise ValueError(f"non_tensor_batch field {name!r} (codec {enc['codec']}) "
                                     "does not support destinations")
                source = _StoreRows(self, view, enc["payload_members"], row_list is None)
                wanted = list(range(ref.batch_size)) if row_list is None else row_list
                values = cd.decode(enc, source, wanted, ref.batch_size)
                out[name] = values if flat else cd.object_array(values)
                continue
            pspec, fspec = view.member(loc.member)
            if selection is not None and selection.indices is None:
                value = self._reader.read(loc.member, pspec, fspec,
                                          member_slice=selection.member_slice,
                                          destination=destinations.get(name))
            else:
                value = self._reader.read(loc.member, pspec, fspec, rows=row_list,
                                          destination=destinations.get(name))
            out[name] = value
        meta = dict(ref.meta_info) if meta_info_keys is None else {
            k: ref.meta_info[k] for k in meta_info_keys if k in ref.meta_info}
        return dp.build_result(batch, non_tensor, meta, data_cls)


__all__ = ["MooncakeBundleTransfer", "RemoteBundleRef"]
