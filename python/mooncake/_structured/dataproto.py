"""DataProto adapters: splitting a DataProto-like value into stage members, the row and field
selections of a read, flat-dict envelopes, and the result's construction.

A DataProto-like value has ``batch`` (tensors / numeric ndarrays indexed by row),
``non_tensor_batch`` (per-row values: numeric ndarrays, or object arrays stored through
``codecs``) and ``meta_info`` (small JSON-safe metadata, kept in the ref). A plain dict whose
keys are only ``batch`` / ``non_tensor_batch`` / ``meta_info`` is such an envelope; any other
dict is taken as ``batch`` fields.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from mooncake._structured import _deps
from mooncake._structured.model import FieldSchema, StructuredMemberSlice, TensorObjectBuffer

SECTIONS = ("batch", "non_tensor_batch", "meta_info")
SCHEMA_ALIASES = {"media_bytes": "bytes_ragged"}


def _as_dict(value):
    if value is None:
        return {}
    if hasattr(value, "items") and callable(value.items):
        return dict(value.items())
    raise TypeError(f"expected mapping-like value, got {type(value).__name__}")


def is_envelope(data):
    return bool(data) and set(data) <= set(SECTIONS) and all(
        v is None or (hasattr(v, "items") and callable(v.items)) for v in data.values())


def split(data):
    """(batch, non_tensor_batch, meta_info) dicts of a DataProto-like value."""
    if hasattr(data, "keys") and hasattr(data, "__getitem__") and not hasattr(data, "batch"):
        if is_envelope(data):
            return (_as_dict(data.get("batch")), _as_dict(data.get("non_tensor_batch")),
                    _as_dict(data.get("meta_info")))
        return dict(data), {}, {}
    if not any(hasattr(data, a) for a in SECTIONS):
        raise TypeError(f"expected a DataProto-like object or a dict, got {type(data).__name__}")
    return (_as_dict(getattr(data, "batch", None)), _as_dict(getattr(data, "non_tensor_batch", None)),
            _as_dict(getattr(data, "meta_info", None)))


def field_rows(section, name, value):
    if isinstance(value, TensorObjectBuffer):
        return len(value)  # TypeError without batch_size
    try:
        return len(value)
    except TypeError:
        raise ValueError(f"DataProto {section} field {name!r} has no batch dimension "
                         f"({type(value).__name__} without len())") from None


def batch_size(batch, non_tensor_batch):
    sizes = {field_rows("batch", k, v) for k, v in batch.items()}
    sizes |= {field_rows("non_tensor_batch", k, v) for k, v in non_tensor_batch.items()}
    if len(sizes) > 1:
        raise ValueError(f"DataProto fields have inconsistent batch sizes: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def check_batch_value(name, value):
    if isinstance(value, TensorObjectBuffer) or _deps.is_tensor(value):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"DataProto batch field {name!r} is an object array; put it in "
                            "non_tensor_batch")
        return
    raise TypeError(f"DataProto batch field {name!r} must be a tensor, a numeric ndarray or a "
                    f"tensor_object_buffer, got {type(value).__name__}")


# -- schemas -----------------------------------------------------------------------------------

def schema_section(name, schema):
    if not isinstance(schema, FieldSchema):
        raise TypeError(f"field_schemas[{name!r}] must be a FieldSchema")
    section = schema.metadata.get("section")
    if section is not None and section not in SECTIONS:
        raise ValueError(f"FieldSchema for {name!r} metadata['section'] must be one of "
                         f"{sorted(SECTIONS)}")
    return section


def check_schema_sections(batch, non_tensor_batch, meta_info, schemas):
    if not schemas:
        return
    where = {}
    for section, fields in zip(SECTIONS, (batch, non_tensor_batch, meta_info)):
        for name in fields:
            where.setdefault(name, set()).add(section)
    for name, schema in schemas.items():
        declared = schema_section(name, schema)
        if declared is None or name not in where or declared in where[name]:
            continue
        got = ", ".join(repr(s) for s in sorted(where[name]))
        raise ValueError(f"FieldSchema for {name!r} declares section {declared!r}, but data "
                         f"contains it in {got}")


def schema_for(schemas, name, section):
    schema = (schemas or {}).get(name)
    if schema is None:
        return None
    declared = schema_section(name, schema)
    return schema if declared in (None, section) else None


def schema_dtype(schema):
    name = schema.metadata.get("dtype")
    if name is None:
        return None
    try:
        dtype = np.dtype(name)
    except TypeError as error:
        raise ValueError(f"invalid FieldSchema metadata['dtype']: {name!r}") from error
    if dtype.kind not in "biufc":
        raise ValueError(f"FieldSchema metadata['dtype'] must be numeric or bool, got {dtype}")
    return dtype


def as_rows(name, value):
    """A non_tensor_batch value as an ndarray (sequences become object arrays)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        out = np.empty(len(value), dtype=object)
        for i, v in enumerate(value):
            out[i] = v
        return out
    raise TypeError(f"non_tensor_batch field {name!r} must be an ndarray or a non-string "
                    f"sequence, got {type(value).__name__}")


# -- reads -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RowSelection:
    count: int
    member_slice: StructuredMemberSlice | None = None
    indices: tuple[int, ...] | None = None

    def row_list(self, total):
        if self.indices is not None:
            return list(self.indices)
        start, end, step = self.member_slice.bounds(total)
        return list(range(start, end, step))


def row_selection(rows, total):
    if rows is None:
        return None
    if isinstance(rows, StructuredMemberSlice):
        if rows.axis != 0:
            raise ValueError("DataProto row slicing supports axis=0 only")
        return RowSelection(rows.count(total), member_slice=rows)
    if isinstance(rows, slice):
        start, end, step = rows.indices(total)
        if step <= 0:
            raise ValueError("DataProto row slicing step must be positive")
        sl = StructuredMemberSlice(0, start, end, step)
        return RowSelection(sl.count(total), member_slice=sl)
    if isinstance(rows, (str, bytes, bytearray)) or not hasattr(rows, "__iter__"):
        raise TypeError("DataProto rows must be a slice, StructuredMemberSlice, or row index "
                        "sequence")
    out = []
    for index in rows:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError("DataProto row indices must be integers")
        i = int(index) + (total if index < 0 else 0)
        if not 0 <= i < total:
            raise IndexError(f"DataProto row index {index} out of range for {total} rows")
        out.append(i)
    return RowSelection(len(out), indices=tuple(out))


def select_fields(ref, fields, batch_fields, non_tensor_fields):
    """(batch names, non_tensor names) a read returns."""
    if fields is not None and (batch_fields is not None or non_tensor_fields is not None):
        raise ValueError("fields cannot be combined with batch_fields or non_tensor_fields")
    for arg in (fields, batch_fields, non_tensor_fields):
        if isinstance(arg, str):
            raise TypeError("field selections must be sequences of names, not a string")
    index = ref.field_index
    if fields is not None:
        names = list(fields)
        _known(ref, names)
        return ([n for n in names if index[n].section == "batch"],
                [n for n in names if index[n].section == "non_tensor_batch"])
    if batch_fields is None and non_tensor_fields is None:
        return ([n for n, loc in index.items() if loc.section == "batch"],
                [n for n, loc in index.items() if loc.section == "non_tensor_batch"])
    b = list(batch_fields or [])
    nt = list(non_tensor_fields or [])
    _known(ref, b + nt)
    wrong = [n for n in b if index[n].section != "batch"] + \
        [n for n in nt if index[n].section != "non_tensor_batch"]
    if wrong:
        raise KeyError(f"DataProto fields are in the other section: {wrong}")
    return b, nt


def _known(ref, names):
    missing = [n for n in names if n not in ref.field_index]
    if missing:
        raise KeyError(f"unknown DataProto fields: {missing}")


def build_result(batch, non_tensor_batch, meta_info, data_cls):
    if data_cls is None or data_cls is dict:
        return {"batch": batch, "non_tensor_batch": non_tensor_batch, "meta_info": meta_info}
    try:
        from_dict = getattr(data_cls, "from_dict", None)
        if callable(from_dict):
            return from_dict(batch, non_tensor_batch, meta_info=meta_info)
        return data_cls(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=meta_info)
    except TypeError as error:
        raise TypeError(f"{getattr(data_cls, '__name__', data_cls)!r} cannot be constructed "
                        "from batch, non_tensor_batch, and meta_info") from error


# -- flat dicts --------------------------------------------------------------------------------

def _sequence(value):
    return isinstance(value, (list, tuple))


def _dense(value):
    return (_deps.is_tensor(value) and value.dim() > 0) or (
        isinstance(value, np.ndarray) and not value.dtype.hasobject and value.ndim > 0)


def flat_to_envelope(data, schemas=None):
    """Sort a flat dict's keys into sections: dense arrays with the common row count are
    ``batch``, sequences of that length ``non_tensor_batch``, the rest ``meta_info``; a
    FieldSchema's ``metadata['section']`` decides for its key."""
    if not hasattr(data, "items"):
        raise TypeError("flat dict payload must be a mapping")
    schemas = schemas or {}
    pinned = {k: schema_section(k, s) for k, s in schemas.items() if k in data}
    sized = {field_rows(sec, k, data[k]) for k, sec in pinned.items()
             if sec in ("batch", "non_tensor_batch")}
    if len(sized) > 1:
        raise ValueError(f"flat dict fields have inconsistent batch sizes: {sorted(sized)}")
    rows = sized.pop() if sized else None
    if rows is None:
        free = {k: v for k, v in data.items() if pinned.get(k) is None}
        dense = {len(v) for v in free.values() if _dense(v)}
        if len(dense) > 1:
            raise ValueError(f"flat dict dense fields have ambiguous batch sizes: {sorted(dense)}")
        if dense:
            rows = dense.pop()
        else:
            seqs = {len(v) for v in free.values() if _sequence(v) or (
                isinstance(v, np.ndarray) and v.ndim > 0)}
            if len(seqs) > 1:
                raise ValueError(f"flat dict fields have ambiguous batch sizes: {sorted(seqs)}; "
                                 "pass FieldSchema metadata['section'] for list-valued "
                                 "metadata fields")
            rows = seqs.pop() if seqs else 0
    batch, non_tensor, meta = {}, {}, {}
    for key, value in data.items():
        section = pinned.get(key)
        if section is None:
            if rows and _dense(value) and len(value) == rows:
                section = "batch"
            elif rows and (_sequence(value) or isinstance(value, np.ndarray)) and \
                    len(value) == rows:
                section = "non_tensor_batch"
            else:
                section = "meta_info"
        if section == "batch":
            batch[key] = value
        elif section == "non_tensor_batch":
            arr = as_rows(key, value)
            if len(arr) != rows:
                raise ValueError(f"flat dict non_tensor_batch field {key!r} has batch size "
                                 f"{len(arr)}, expected {rows}")
            non_tensor[key] = arr
        else:
            meta[key] = value
    return {"batch": batch, "non_tensor_batch": non_tensor, "meta_info": meta}


def envelope_to_flat(result):
    meta = dict(result.get("meta_info") or {})
    batch = dict(result.get("batch") or {})
    non_tensor = dict(result.get("non_tensor_batch") or {})
    overlap = (set(meta) & set(batch)) | (set(meta) & set(non_tensor)) | \
        (set(batch) & set(non_tensor))
    if overlap:
        raise ValueError(f"Duplicate keys found across DataProto sections: {sorted(overlap)}")
    out = dict(meta)
    out.update(batch)
    for key, value in non_tensor.items():
        out[key] = value.tolist() if isinstance(value, np.ndarray) and value.dtype.hasobject \
            else value
    return out

