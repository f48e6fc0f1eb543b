"""The reference's private codec helpers of ``mooncake.structured_object_store``, over our codecs.

Its tests (and code written against its module) call these by name: encoders return
``(payload, metadata)`` as they are stored (``data`` is the row bytes as buffers, ``offsets``,
``nulls``, and for typed rows ``shapes``/``ndims``), decoders take such a payload with ``data``
whole in memory. The stored format is the one ``codecs`` writes for every bundle, so a payload
from one side decodes on the other.
"""

from __future__ import annotations

import numpy as np

from mooncake._structured import codecs as cd
from mooncake._structured.dataproto import SCHEMA_ALIASES, schema_dtype


def _joined(payload):
    """The payload with ``data`` as one contiguous buffer (a decoder reads byte ranges of it)."""
    return {**payload, "data": cd.joined(payload["data"])}


def _decode(codec, payload, rows, metadata):
    encoded = {"codec": codec, "metadata": dict(metadata or {})}
    return cd.decode(encoded, cd.MemorySource(_joined(payload)), list(range(rows)), rows)


def _encode_msgpack_ragged_values(path, values):
    """Rows as msgpack blobs (``msgpack_ragged``); UnsupportedValues (a ValueError) for a row
    msgpack cannot hold."""
    enc = cd.encode(path, list(values), "msgpack_ragged")
    return enc.payload, enc.metadata


def _decode_msgpack_ragged_values(payload, rows):
    """The ``rows`` values of a msgpack_ragged payload; ValueError when its offsets or nulls do
    not have ``rows`` entries (+1 for offsets)."""
    return _decode("msgpack_ragged", payload, rows, {})


def _encode_typed_ragged_values(values, dtype_hint=None):
    """Numeric rows of any shapes as one flat ``dtype`` run (``physical_layout``
    ``contiguous_flat``) with per-row offsets, shapes and ndims; None rows are null."""
    return cd._encode_typed(list(values), dtype_hint)


def _encode_typed_ragged_regular_ndarray_rows(values, dtype):
    """The typed_ragged encoding of two or more C-contiguous ndarray rows of one shape and of
    ``dtype``; None when the rows are not such (one row, a null, another shape or dtype)."""
    values = list(values)
    dtype = np.dtype(dtype)
    if len(values) < 2:
        return None
    first = values[0]
    for v in values:
        if not (isinstance(v, np.ndarray) and v.dtype == dtype and v.flags.c_contiguous
                and v.shape == first.shape):
            return None
    return cd._encode_typed(values, dtype)


def _decode_typed_ragged_values(payload, rows, metadata=None):
    """The ``rows`` rows of a typed_ragged payload. With ``data`` a writable array in memory the
    ndarray rows are views into it (no copy)."""
    return _decode("typed_ragged", payload, rows, metadata or {"dtype": "<i8"})


def _encode_with_schema(path, values, schema):
    """A field's rows encoded as its FieldSchema says; ``codec="auto"`` infers one and raises
    ValueError when no codec holds the rows safely."""
    values = list(values)
    if schema.codec == "auto":
        try:
            codec = cd.infer_codec(path, values)
        except cd.UnsupportedValues as error:
            raise ValueError(f"unable to infer a safe codec for structured non-tensor field "
                             f"{path!r}: {error}") from error
    else:
        codec = SCHEMA_ALIASES.get(schema.codec, schema.codec)
    enc = cd.encode(path, values, codec, dtype_hint=schema_dtype(schema),
                    nullable=schema.nullable, options=schema.metadata)
    return enc.payload, enc.metadata
