"""Row codecs for DataProto ``non_tensor_batch`` object arrays.

An object array (one Python value per row) has no byte layout, so it is stored as a few dense
payloads chosen from its contents (inferred, or given by a ``FieldSchema``); codec: rows ->
payloads:

- ``ndarray``: numeric scalars (bool, int, float) -> ``values`` (one dtype), ``nulls``;
- ``utf8_ragged``: str -> ``data`` (UTF-8), ``offsets``, ``nulls``;
- ``bytes_ragged``: bytes, bytearray, memoryview -> ``data``, ``offsets``, ``nulls``;
- ``msgpack_ragged`` (the reference's, written by default): dicts, lists, tuples of JSON-like
  values -> ``data`` (one msgpack value per row), ``offsets``, ``nulls``;
- ``json_ragged``: the same rows as JSON text (what older objects of ours hold; still read, and
  written where msgpack is not installed);
- ``typed_ragged``: numeric ndarrays or number lists, any shape per row -> ``data`` (values),
  ``offsets`` (elements), ``shapes`` / ``ndims`` (per row), ``nulls``; its metadata names the
  reference's ``physical_layout`` ``contiguous_flat`` (rows back to back, the only one read);
- ``ragged_tensor``: torch tensors of one dtype, any shape per row -> ``data`` (bytes),
  ``offsets`` (bytes), ``shapes``, ``ndims``, ``nulls``;
- ``structured_recursive``: dicts / lists holding tensors, ndarrays or bytes -> ``tree.*`` (a JSON
  skeleton per row) and ``leaf<g>.*`` (one ragged group per leaf kind and dtype);
- ``ragged_tensor_dict`` (schema only): dicts of tensors -> ``<key>.*`` (a ragged_tensor column
  per key), ``nulls``.

``None`` rows are allowed everywhere (``nulls``; a schema with ``nullable=False`` refuses them).
``offsets`` has ``rows + 1`` entries, so any set of rows is read as byte ranges of ``data``
without reading the rest. Anything else is refused with a ``ValueError`` naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mooncake._structured import _deps, hooks
from mooncake._structured.bundle import Parts
from mooncake._structured.model import DirectCopyPayload, MultiBufferPayload
from mooncake._structured.inference import MISSING, choose_leaf_codec, escape_key, infer_structure

CODECS = ("ndarray", "utf8_ragged", "bytes_ragged", "msgpack_ragged", "json_ragged", "typed_ragged",
          "ragged_tensor", "structured_recursive", "ragged_tensor_dict")
LEAF_KEY = "__mooncake_leaf__"
MAX_DEPTH = 64


@dataclass
class Encoded:
    codec: str
    rows: int
    payload: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


class UnsupportedValues(ValueError):
    pass


def _nulls(values):
    return np.fromiter((v is None for v in values), dtype=np.bool_, count=len(values))


def _is_bytes_like(v):
    return isinstance(v, (bytes, bytearray, memoryview))


def _is_number(v):
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


# -- inference ---------------------------------------------------------------------------------

def infer_codec(path, values):
    """The codec of rows ``values`` (``inference.choose_leaf_codec``); all-null rows are
    ``msgpack_ragged`` (``json_ragged`` without msgpack); raises UnsupportedValues when no codec
    can hold them."""
    if all(v is None for v in values):
        return "msgpack_ragged" if _deps.msgpack_module() is not None else "json_ragged"
    decision = choose_leaf_codec(values)
    if not decision.accepted:
        raise UnsupportedValues(f"unsupported structured non-tensor field {path}: "
                                f"{decision.reason}")
    return decision.codec


def _leaf_group(value):
    """The leaf group (codec, dtype) of a value the JSON tree cannot carry, or None."""
    if _is_bytes_like(value):
        return ("bytes_ragged", "")
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return ("typed_ragged", value.dtype.str)
    if _deps.is_tensor(value):
        return ("ragged_tensor", str(value.dtype))
    return None


# -- encoding ----------------------------------------------------------------------------------

def _ragged_blobs(values, to_bytes):
    blobs = [b"" if v is None else to_bytes(v) for v in values]
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    views = tuple(memoryview(b).cast("B") for b in blobs if len(b))
    return {"data": Parts(views), "offsets": offsets, "nulls": _nulls(values)}


class RowTypeError(TypeError, AttributeError):
    """A utf8_ragged row that is not a str: a TypeError, and also the AttributeError the
    reference raises there (its encoder calls the row's ``.encode``), so that code written
    against either implementation catches it."""


def _utf8(v):
    if not isinstance(v, str):
        raise RowTypeError(f"utf8_ragged rows must be str, got {type(v).__name__}")
    return v.encode("utf-8")


def _bytes(v):
    if not _is_bytes_like(v):
        raise TypeError(f"bytes_ragged rows must be bytes-like, got {type(v).__name__}")
    return bytes(v)


def _json(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=_json_default).encode("utf-8")


def _msgpack(v):
    return _deps.require_msgpack().packb(v, use_bin_type=True, default=_json_default)


def _encode_scalars(values, dtype_hint=None):
    present = [v for v in values if v is not None]
    for v in present:
        if not _is_number(v):
            raise TypeError(f"ndarray codec rows must be numeric scalars, got {type(v).__name__}")
    dtype = np.dtype(dtype_hint) if dtype_hint is not None else (
        np.result_type(*[np.asarray(v).dtype for v in present]) if present else np.dtype("int64"))
    out = np.zeros(len(values), dtype=dtype)
    for i, v in enumerate(values):
        if v is not None:
            out[i] = v
    # the reference's payload and metadata names ("data", str dtype, shape)
    return {"data": out, "nulls": _nulls(values)}, {"dtype": str(dtype), "shape": [len(out)]}


def _shape_table(shapes_list):
    """(shapes [rows, max ndim], ndims [rows]) of per-row shapes (None rows: ndim 0)."""
    width = max([len(sh) for sh in shapes_list if sh is not None] or [1])
    shapes = np.zeros((len(shapes_list), width), dtype=np.int64)
    ndims = np.zeros(len(shapes_list), dtype=np.int64)
    for i, sh in enumerate(shapes_list):
        if sh is not None:
            shapes[i, :len(sh)] = sh
            ndims[i] = len(sh)
    return shapes, ndims


def _encode_typed(values, dtype_hint=None):
    arrays = [None if v is None else np.asarray(v) for v in values]
    present = [a for a in arrays if a is not None]
    for a in present:
        if a.dtype.kind not in "biuf":
            raise TypeError(f"typed_ragged rows must be numeric, got dtype {a.dtype}")
    if dtype_hint is not None:
        dtype = np.dtype(dtype_hint)
    elif present:
        dtype = np.result_type(*[a.dtype for a in present])
    else:
        dtype = np.dtype("int64")
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    flat = []
    for i, a in enumerate(arrays):
        n = 0
        if a is not None:
            a = np.ascontiguousarray(a, dtype=dtype)
            n = a.size
            if n:
                flat.append(a.reshape(-1))
        offsets[i + 1] = offsets[i] + n
    shapes, ndims = _shape_table([None if a is None else a.shape for a in arrays])
    is_array = [isinstance(v, np.ndarray) for v in values]
    live = [f for v, f in zip(values, is_array) if v is not None]
    row_format = "ndarray" if all(live) else ("mixed" if any(live) else "list")
    payload = {"data": _typed_data(flat, dtype, int(offsets[-1])), "offsets": offsets,
               "shapes": shapes, "ndims": ndims, "nulls": _nulls(values)}
    # The reference's metadata (its decoder reads row_format and ndarray_rows).
    return payload, {"dtype": str(dtype), "max_ndim": int(max(
                         [a.ndim for a in arrays if a is not None] or [0])),
                     "shape_policy": "ragged", "row_format": row_format,
                     "ndarray_rows": is_array if row_format == "mixed" else None,
                     "physical_layout": "contiguous_flat"}


def _typed_data(flat, dtype, total_elems):
    """The flat element run of typed rows as a payload of ``dtype`` and shape
    (total_elems,): gathered at write time by the native copy where it is there
    (``DirectCopyPayload``), else written from the rows' own buffers."""
    if len(flat) > 1 and hooks.concat_arrays_into() is not None:
        return DirectCopyPayload.from_flat_arrays(flat, dtype, total_elems)
    return MultiBufferPayload(tuple(memoryview(f.view(np.uint8)) for f in flat), tuple(flat),
                              np.dtype(dtype).str, (total_elems,))


def _encode_tensors(values):
    """Tensor rows as the reference's ragged_tensor: the typed_ragged layout (one flat run,
    offsets and shapes in elements) with the torch dtype in the metadata. bfloat16 rows are
    accepted (the reference refuses them: its layout goes through numpy, which has no
    bfloat16; ours copies tensor bytes)."""
    from mooncake._structured.members import tensor_bytes

    torch = _deps.require_torch()
    present = [v for v in values if v is not None]
    for v in present:
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"ragged_tensor rows must be tensors, got {type(v).__name__}")
    dtypes = sorted({str(v.dtype) for v in present})
    if len(dtypes) > 1:
        raise ValueError(f"mixed tensor dtype: {dtypes}")
    dtype = dtypes[0] if dtypes else "torch.float32"
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    flat = []
    for i, v in enumerate(values):
        n = 0
        if v is not None:
            n = v.numel()
            if n:
                flat.append(tensor_bytes(v))
        offsets[i + 1] = offsets[i] + n
    shapes, ndims = _shape_table([None if v is None else tuple(v.shape) for v in values])
    try:
        np_dtype = torch.empty(0, dtype=getattr(torch, dtype[6:])).numpy().dtype.str
    except (TypeError, RuntimeError):  # bfloat16: no numpy dtype, the data is plain bytes
        np_dtype = None
    data = MultiBufferPayload(tuple(memoryview(f) for f in flat), tuple(flat), np_dtype,
                              None if np_dtype is None else (int(offsets[-1]),))
    payload = {"data": data, "offsets": offsets, "shapes": shapes, "ndims": ndims,
               "nulls": _nulls(values)}
    return payload, {"dtype": dtype, "max_ndim": int(max([len(v.shape) for v in present] or [0])),
                     "shape_policy": "ragged", "row_format": "ndarray", "ndarray_rows": None,
                     "physical_layout": "contiguous_flat"}


def _tensor_dict_keys(path, values, declared):
    if declared is None:
        keys = list(dict.fromkeys(k for v in values if isinstance(v, dict) for k in v))
    elif isinstance(declared, (list, tuple, dict)):
        keys = list(declared)
    else:
        raise ValueError(f"FieldSchema for {path!r} metadata['keys'] must be a list or a dict")
    for key in keys:
        if not isinstance(key, str) or not key or any(c in key for c in "./\\"):
            raise ValueError(f"ragged_tensor_dict keys of {path!r} must be non-empty strings and "
                             f"must not contain '.', '/' or '\\': {key!r}")
    return keys


def _encode_tensor_dict(path, values, options):
    """Rows that are dicts of tensors (or None): one ragged_tensor column per key."""
    declared = (options or {}).get("keys")
    keys = _tensor_dict_keys(path, values, declared)
    for v in values:
        if v is None:
            continue
        if not isinstance(v, dict):
            raise TypeError(f"ragged_tensor_dict rows of {path!r} must be dicts or None, got "
                            f"{type(v).__name__}")
        extra = [k for k in v if k not in keys]
        if extra:
            raise ValueError(f"ragged_tensor_dict row of {path!r} has keys not declared in the "
                             f"FieldSchema: {extra}")
        if any(x is None for x in v.values()):
            raise TypeError(f"ragged_tensor_dict rows of {path!r} must omit a key rather than "
                            "give an explicit None")
    payload, columns = {"nulls": _nulls(values)}, {}
    for key in keys:
        column = [None if v is None else v.get(key) for v in values]
        enc = encode(f"{path}.{key}", column, "ragged_tensor")
        payload.update({f"{key}.{k}": p for k, p in enc.payload.items()})
        columns[key] = enc.metadata
    return payload, {"keys": keys, "columns": columns}


def _decode_tensor_dict(meta, source, rows, total_rows):
    nulls = source.array("nulls")
    _check_len("nulls", nulls, total_rows)
    keys = meta.get("keys")
    if not isinstance(keys, list):
        raise ValueError("ragged_tensor_dict metadata has no keys")
    out = [None if nulls[r] else {} for r in rows]
    for key in keys:
        col = decode({"codec": "ragged_tensor", "metadata": meta["columns"][key]},
                     _Prefixed(source, f"{key}."), rows, total_rows)
        for row, value in zip(out, col):
            if row is not None and value is not None:
                row[key] = value
    return out


def encode(path, values, codec=None, *, dtype_hint=None, nullable=True, options=None):
    """Encode a list of row values; ``codec`` None: inferred. ``options``: the FieldSchema's
    metadata (``keys`` for ``ragged_tensor_dict``)."""
    values = list(values)
    if not nullable and any(v is None for v in values):
        raise ValueError(f"FieldSchema for {path!r} is not nullable")
    if codec is None:
        codec = infer_codec(path, values)
    if codec == "ndarray":
        payload, meta = _encode_scalars(values, dtype_hint)
    elif codec == "utf8_ragged":
        payload, meta = _ragged_blobs(values, _utf8), {}
    elif codec == "bytes_ragged":
        payload, meta = _ragged_blobs(values, _bytes), {}
    elif codec in ("msgpack_ragged", "json_ragged"):
        try:
            payload, meta = _ragged_blobs(values, _msgpack if codec == "msgpack_ragged" else _json), {}
        except (TypeError, ValueError) as error:
            raise UnsupportedValues(f"unsupported structured non-tensor field {path}: {error}") \
                from error
    elif codec == "typed_ragged":
        payload, meta = _encode_typed(values, dtype_hint)
    elif codec == "ragged_tensor":
        payload, meta = _encode_tensors(values)
    elif codec == "structured_recursive":
        payload, meta = _encode_nodes(path, values) or _encode_tree(path, values)
    elif codec == "ragged_tensor_dict":
        payload, meta = _encode_tensor_dict(path, values, options)
    else:
        raise ValueError(f"unsupported schema codec: {codec!r} (known: {', '.join(CODECS)})")
    return Encoded(codec, len(values), payload, meta)


def _lookup(value, tokens):
    """The value at a path (tokens: dict keys and list indexes) in a row; MISSING if absent."""
    for token in tokens:
        if isinstance(token, str):
            if not isinstance(value, dict) or token not in value:
                return MISSING
        elif not isinstance(value, (list, tuple)) or token >= len(value):
            return MISSING
        value = value[token]
    return value


def _path_tokens(path, root):
    """The keys and indexes of an inferred path below ``root`` (escaped keys undone)."""
    rest, tokens, cur, i = path[len(root):], [], [], 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):
            cur.append(rest[i + 1])
            i += 2
            continue
        if c in ".[":
            if cur:
                tokens.append("".join(cur))
                cur = []
            if c == "[":
                end = rest.index("]", i)
                tokens.append(int(rest[i + 1:end]))
                i = end + 1
                continue
        else:
            cur.append(c)
        i += 1
    if cur:
        tokens.append("".join(cur))
    return tokens


def _encode_nodes(path, values):
    """Rows of nested dicts / lists as the reference stores them: the inferred containers
    (``nodes``: path, type, children, with per-row ``missing``, ``row_mask`` and list
    ``lengths`` payloads) and one column per leaf path (``leaves``: its codec, metadata and
    ``leaf.<i>.*`` payloads plus ``missing``). None when a leaf column has no codec (the rows
    are then stored as skeletons and leaf groups, ``_encode_tree``)."""
    leaves, nodes = [], []
    try:
        infer_structure(path, values, leaves, nodes)
    except ValueError:
        return None
    if not nodes:
        return None
    payload, node_specs, leaf_specs = {}, [], []
    for i, node in enumerate(nodes):
        tokens = _path_tokens(node.path, path)
        spec = {"id": i, "path": node.path, "node_type": node.node_type,
                "children": list(node.children), "missing_payload": f"node.{i}.missing"}
        payload[f"node.{i}.missing"] = np.asarray(
            [_lookup(v, tokens) is MISSING for v in values], dtype=np.bool_)
        if node.row_mask is not None:
            payload[f"node.{i}.row_mask"] = np.asarray(node.row_mask, dtype=np.bool_)
            spec["row_mask_payload"] = f"node.{i}.row_mask"
        if node.lengths is not None:
            payload[f"node.{i}.lengths"] = np.asarray(node.lengths, dtype=np.int64)
            spec["lengths_payload"] = f"node.{i}.lengths"
        node_specs.append(spec)
    for i, leaf in enumerate(leaves):
        missing = [v is MISSING for v in leaf.values]
        rows = [None if m else v for m, v in zip(missing, leaf.values)]
        codec, reason = leaf.decision.codec, leaf.decision.reason
        if not leaf.decision.accepted:
            if any(v is not None for v in rows):
                return None
            codec, reason = "json_ragged", "all rows are null or missing"
        if codec in ("structured_recursive", "ragged_tensor_dict"):
            return None
        try:
            enc = encode(leaf.path, rows, codec)
        except (UnsupportedValues, TypeError, ValueError):
            return None
        members = {}
        for name, value in enc.payload.items():
            payload[f"leaf.{i}.{name}"] = value
            members[name] = f"leaf.{i}.{name}"
        payload[f"leaf.{i}.missing"] = np.asarray(missing, dtype=np.bool_)
        members["missing"] = f"leaf.{i}.missing"
        leaf_specs.append({"id": i, "path": leaf.path, "codec": enc.codec, "rows": enc.rows,
                           "metadata": {**enc.metadata,
                                        "schema_source": "inferred_from_runtime_values",
                                        "decision_reason": reason},
                           "payload_members": members})
    return payload, {"schema_source": "inferred_from_runtime_values", "structure_version": 1,
                     "root_path": path, "nodes": node_specs, "leaves": leaf_specs}


def _decode_nodes(meta, source, rows, total_rows):
    """Rows ``rows`` of the reference's recursive layout (``_encode_nodes``)."""
    nodes, leaves, root = meta.get("nodes"), meta.get("leaves"), meta.get("root_path")
    if not isinstance(nodes, list) or not isinstance(leaves, list) or not isinstance(root, str):
        raise ValueError("structured_recursive metadata has no nodes, leaves or root_path")
    by_path = {}
    for leaf in leaves:
        members = leaf.get("payload_members")
        if not isinstance(members, dict) or "missing" not in members:
            raise ValueError(f"structured_recursive leaf {leaf.get('path')!r} has no payloads")
        got = decode({"codec": leaf["codec"], "metadata": leaf.get("metadata")},
                     _Mapped(source, members), rows, total_rows)
        missing = source.rows_of(members["missing"], rows)
        by_path[leaf["path"]] = [MISSING if m else v for m, v in zip(missing, got)]

    def child_path(node, child):
        if node["node_type"] == "dict":
            return f"{node['path']}.{escape_key(str(child))}"
        return f"{node['path']}[{int(child)}]"

    def payload(node, key):
        name = node.get(key)
        return None if name is None else source.rows_of(name, rows)

    depth = lambda node: node["path"].count(".") + node["path"].count("[")  # noqa: E731
    for node in sorted(nodes, key=depth, reverse=True):
        missing, mask = payload(node, "missing_payload"), payload(node, "row_mask_payload")
        lengths = payload(node, "lengths_payload")
        out = []
        for j in range(len(rows)):
            if missing is not None and missing[j]:
                out.append(MISSING)
            elif mask is not None and not mask[j]:
                out.append(None)
            elif node["node_type"] == "dict":
                item = {}
                for child in node["children"]:
                    value = by_path[child_path(node, child)][j]
                    if value is not MISSING:
                        item[child] = value
                out.append(item)
            else:
                n = int(lengths[j]) if lengths is not None else len(node["children"])
                item = [None] * n
                for child in node["children"]:
                    if int(child) < n:
                        value = by_path[child_path(node, child)][j]
                        if value is not MISSING:
                            item[int(child)] = value
                out.append(item)
        by_path[node["path"]] = out
    if root not in by_path:
        raise ValueError("structured_recursive metadata does not cover its root_path")
    return by_path[root]


class _Mapped:
    """A leaf's payloads under their stored member names."""

    def __init__(self, source, members):
        self.source, self.members = source, members

    def _name(self, name):
        if name not in self.members:
            raise ValueError(f"structured_recursive leaf has no {name!r} payload")
        return self.members[name]

    def array(self, name):
        return self.source.array(self._name(name))

    def rows_of(self, name, rows):
        return self.source.rows_of(self._name(name), rows)

    def ranges(self, name, spans):
        return self.source.ranges(self._name(name), spans)


def _encode_tree(path, values):
    """Rows of nested dicts / lists whose leaves include tensors, numeric ndarrays or bytes:
    each row's JSON skeleton (``tree.*``, leaves replaced by ``{LEAF_KEY: [group, index]}``)
    plus one ragged payload group per leaf kind and dtype (``leaf<g>.*``)."""
    groups, leaves = {}, []

    def walk(value, depth):
        if depth > MAX_DEPTH:
            raise UnsupportedValues(f"unsupported structured non-tensor field {path}: nested "
                                    f"deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, (str, bool, int, float)):
            if isinstance(value, float) and not np.isfinite(value):
                raise UnsupportedValues(f"unsupported structured non-tensor field {path}: "
                                        "non-finite float")
            return value
        if isinstance(value, np.generic):
            return walk(value.item(), depth)
        group = _leaf_group(value)
        if group is not None:
            g = groups.setdefault(group, len(groups))
            if g == len(leaves):
                leaves.append([])
            leaves[g].append(value)
            return {LEAF_KEY: [g, len(leaves[g]) - 1]}
        if isinstance(value, dict):
            if LEAF_KEY in value:
                raise UnsupportedValues(f"structured non-tensor field {path} rows must not "
                                        f"contain the reserved key {LEAF_KEY!r}")
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise UnsupportedValues(f"unsupported structured non-tensor field {path}: dict "
                                        f"keys must be str, got {type(bad[0]).__name__}")
            return {k: walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v, depth + 1) for v in value]
        raise UnsupportedValues(f"unsupported structured non-tensor field {path}: no codec for "
                                f"a nested {type(value).__name__}")

    skeletons = [None if v is None else walk(v, 0) for v in values]
    tree = encode(f"{path}.tree", skeletons, "json_ragged")
    payload = {f"tree.{k}": v for k, v in tree.payload.items()}
    meta_groups = []
    for (codec, _dtype), g in groups.items():
        enc = encode(f"{path}.leaf{g}", leaves[g], codec)
        payload.update({f"leaf{g}.{k}": v for k, v in enc.payload.items()})
        meta_groups.append({"codec": codec, "metadata": enc.metadata, "count": len(leaves[g])})
    return payload, {"groups": meta_groups}


class _Prefixed:
    def __init__(self, source, prefix):
        self.source, self.prefix = source, prefix

    def array(self, name):
        return self.source.array(self.prefix + name)

    def rows_of(self, name, rows):
        return self.source.rows_of(self.prefix + name, rows)

    def ranges(self, name, spans):
        return self.source.ranges(self.prefix + name, spans)


def _decode_tree(meta, source, rows, total_rows):
    if "nodes" in meta:
        return _decode_nodes(meta, source, rows, total_rows)
    skeletons = decode({"codec": "json_ragged"}, _Prefixed(source, "tree."), rows, total_rows)
    groups = meta.get("groups")
    if not isinstance(groups, list):
        raise ValueError("structured_recursive metadata has no leaf groups")
    wanted = [set() for _ in groups]

    def refs(node):
        if isinstance(node, dict):
            if LEAF_KEY in node:
                g, i = node[LEAF_KEY]
                if not (0 <= g < len(groups) and 0 <= i < groups[g]["count"]):
                    raise ValueError(f"structured_recursive leaf {g}/{i} does not exist")
                wanted[g].add(i)
            else:
                for v in node.values():
                    refs(v)
        elif isinstance(node, list):
            for v in node:
                refs(v)

    for sk in skeletons:
        refs(sk)
    found = []
    for g, group in enumerate(groups):
        idx = sorted(wanted[g])
        vals = decode({"codec": group["codec"], "metadata": group.get("metadata")},
                      _Prefixed(source, f"leaf{g}."), idx, group["count"]) if idx else []
        found.append(dict(zip(idx, vals)))

    def build(node):
        if isinstance(node, dict):
            if LEAF_KEY in node:
                g, i = node[LEAF_KEY]
                return found[g][i]
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(v) for v in node]
        return node

    return [build(sk) for sk in skeletons]


# -- decoding ----------------------------------------------------------------------------------

class RowSource:
    """What a decoder reads: ``array(name)`` (a whole small payload as an ndarray: offsets,
    nulls, shapes), ``rows_of(name, rows)`` (rows of a dense payload) and
    ``ranges(name, [(start, end), ...])`` (byte ranges of the ``data`` payload)."""


def joined(value):
    """A payload written from several buffers (or gathered arrays) as the bytes it stores."""
    if isinstance(value, DirectCopyPayload):
        return b"".join(np.ascontiguousarray(a).tobytes() for a in value.arrays)
    if isinstance(value, MultiBufferPayload):
        return b"".join(bytes(v) for v in value.buffers)
    return value


class MemorySource(RowSource):
    def __init__(self, objects):
        self.objects = objects

    def array(self, name):
        return self.objects[name]

    def rows_of(self, name, rows):
        return self.objects[name][list(rows)]

    def ranges(self, name, spans):
        data = joined(self.objects[name])
        view = memoryview(data) if not isinstance(data, np.ndarray) else memoryview(
            data.reshape(-1).view(np.uint8))
        return [view[a:b] for a, b in spans]


def _check_len(name, array, want):
    if len(array) != want:
        raise ValueError(f"structured non-tensor payload {name!r} has {len(array)} entries, "
                         f"expected {want} (offsets length must be rows + 1)")


def decode(encoded, source, rows, total_rows):
    """The values of rows ``rows`` (a list of indices) of an encoded field."""
    codec = encoded["codec"]
    meta = encoded.get("metadata") or {}
    if codec == "structured_recursive":
        return _decode_tree(meta, source, rows, total_rows)
    if codec == "ragged_tensor_dict":
        return _decode_tensor_dict(meta, source, rows, total_rows)
    nulls = source.array("nulls")
    _check_len("nulls", nulls, total_rows)
    if codec == "ndarray":
        values = source.rows_of("values" if meta.get("shape") is None else "data",
                                rows).tolist()  # "values": our earlier name
        return [None if nulls[r] else v for r, v in zip(rows, values)]
    if codec not in CODECS:
        raise ValueError(f"unsupported structured non-tensor codec: {codec!r}")
    offsets = source.array("offsets")
    _check_len("offsets", offsets, total_rows + 1)
    if np.any(np.diff(offsets) < 0) or (len(offsets) and offsets[0] != 0):
        raise ValueError("structured non-tensor offsets must be non-decreasing from 0")
    live = [r for r in rows if not nulls[r]]
    if codec == "typed_ragged":
        layout = meta.get("physical_layout", "contiguous_flat")
        if layout != "contiguous_flat":
            raise ValueError(f"typed_ragged physical_layout {layout!r} is not supported "
                             "(only contiguous_flat)")
        itemsize = np.dtype(meta["dtype"]).itemsize
    elif codec == "ragged_tensor" and "physical_layout" in meta:  # element offsets
        from mooncake._structured.members import torch_dtype

        itemsize = torch_dtype(meta["dtype"]).itemsize
    else:  # byte offsets (our earlier ragged_tensor)
        itemsize = 1
    spans = [(int(offsets[r]) * itemsize, int(offsets[r + 1]) * itemsize) for r in live]
    blobs = dict(zip(live, source.ranges("data", spans))) if live else {}
    shapes = ndims = None
    if codec in ("typed_ragged", "ragged_tensor"):
        shapes, ndims = source.array("shapes"), source.array("ndims")
        _check_len("shapes", shapes, total_rows)
        _check_len("ndims", ndims, total_rows)
    out = []
    for r in rows:
        if nulls[r]:
            out.append(None)
            continue
        blob = blobs[r]
        if codec == "utf8_ragged":
            out.append(bytes(blob).decode("utf-8"))
        elif codec == "bytes_ragged":
            out.append(bytes(blob))
        elif codec == "msgpack_ragged":
            out.append(_deps.require_msgpack().unpackb(bytes(blob), raw=False))
        elif codec == "json_ragged":
            out.append(json.loads(bytes(blob).decode("utf-8")))
        elif codec == "typed_ragged":
            # A row over private writable memory (a fresh read buffer, or the caller's array)
            # is a view into it, as the reference's decoder gives; read-only bytes are copied so
            # that every row is writable.
            raw = blob if isinstance(blob, memoryview) and not blob.readonly else bytes(blob)
            arr = np.frombuffer(raw, dtype=np.dtype(meta["dtype"])).reshape(
                tuple(int(d) for d in shapes[r][:ndims[r]]))
            if _row_is_list(meta, r):
                out.append(arr.tolist())
            else:
                out.append(arr if arr.flags.writeable else arr.copy())
        else:
            from mooncake._structured.members import torch_dtype

            torch = _deps.require_torch()
            shape = tuple(int(d) for d in shapes[r][:ndims[r]])
            dtype = torch_dtype(meta["dtype"])
            if len(blob):
                out.append(torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape))
            else:
                out.append(torch.empty(shape, dtype=dtype))
    return out


def _row_is_list(meta, row):
    """Whether typed row ``row`` was a list (given back as one) rather than an ndarray."""
    fmt = meta.get("row_format")
    if fmt is None:  # our earlier metadata
        return meta.get("row_type") == "list"
    if fmt == "mixed":
        flags = meta.get("ndarray_rows") or []
        return not (row < len(flags) and bool(flags[row]))
    return fmt == "list"


def object_array(values):
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out
