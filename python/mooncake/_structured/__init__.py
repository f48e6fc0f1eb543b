"""Implementation of ``mooncake.structured_object_store`` (the public facade) and
``mooncake.dataproto_catalog``: one job per file.

- ``_deps``: the numpy requirement (the ``structured`` extra) and lazy torch.
- ``model``: the public value types (policies, refs, read specs, payload wrappers).
- ``keys``: the key layout in the store and name validation.
- ``manifest``: the JSON manifest of a bundle, its validation and payload specs.
- ``calls``: single store calls: method lookup, statuses, write configs (group ids per key).
- ``puts``: the write path (per-chunk ``put``, pool-staged ``batch_put_from``, tensors).
- ``transport``: the reads (whole and ranged, with their fallbacks) and cleanup, over ``puts``.
- ``hooks``: the facade's replaceable functions (the native gather copy, the tensor-codec
  probe), read from the facade at each use.
- ``bundle``: bundles: a manifest plus meta and named payloads, written all or nothing.
- ``members``: structured members (ndarray, torch tensor, bytes) and their partial reads.
- ``codecs``: the row codecs of DataProto ``non_tensor_batch`` object arrays.
- ``handles``: the JSON-safe DataProto ref handles that cross process boundaries.
- ``dataproto``: DataProto stages over structured objects (put, append, get, rows).
- ``transfer``: ``MooncakeBundleTransfer``, the user-facing object.
- ``catalog``: ``DataProtoCatalog``, the row/field index over immutable handles.

Importing this package (or the facade) needs numpy; ``import mooncake`` never imports it.
"""
