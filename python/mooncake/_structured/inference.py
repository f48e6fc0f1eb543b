"""Codec choice for the rows of a ``non_tensor_batch`` object array, and a structural view of
nested rows (which fields of which dicts, which list positions, which leaf values).

``choose_leaf_codec(values)`` says which row codec can hold a list of values and why (a
``Decision``; ``accepted`` False with the reason when none can). ``infer_structure`` walks rows of
dicts and short lists of containers into *nodes* (a dict's keys or a list's positions, with
which rows have them) and *leaves* (the values at one path, ``MISSING`` where a row lacks the
key or position), each leaf with its decision. Paths are ``root.key`` and ``root[i]``; a key's
``.``, ``[`` and ``\\`` are escaped with a backslash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np

from mooncake._structured import _deps

MAX_STRUCT_KEYS = 64
MAX_LIST_LEN = 8
MAX_DEPTH = 32


class _Missing:
    """A key or list position a row does not have (unlike an explicit ``None``)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "MISSING"

    def __bool__(self):
        return False


MISSING = _Missing()


@dataclass(frozen=True)
class Decision:
    accepted: bool
    codec: str
    reason: str


@dataclass
class Leaf:
    path: str
    values: list
    decision: Decision


@dataclass
class Node:
    path: str
    node_type: str  # "dict" or "list"
    children: list = field(default_factory=list)
    lengths: list | None = None
    row_mask: list | None = None


def escape_key(key):
    return key.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")


def _bytes_like(v):
    return isinstance(v, (bytes, bytearray, memoryview))


def _number(v):
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _json_like(v, depth=0):
    if depth > MAX_DEPTH:
        return False
    if v is None or isinstance(v, (str, bool, int, float)):
        return True
    if isinstance(v, dict):
        return all(isinstance(k, str) and _json_like(x, depth + 1) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return all(_json_like(x, depth + 1) for x in v)
    return isinstance(v, np.generic)


def has_leaf(value, depth=0):
    """Whether a nested value holds something JSON cannot carry: a tensor, a numeric ndarray
    or bytes."""
    if depth > MAX_DEPTH:
        return False
    if _bytes_like(value) or _deps.is_tensor(value) or (
            isinstance(value, np.ndarray) and value.dtype.kind in "biuf"):
        return True
    if isinstance(value, dict):
        return any(has_leaf(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_leaf(v, depth + 1) for v in value)
    return False


def _object_codec():
    """The codec of JSON-like container rows: the reference's ``msgpack_ragged`` (so the
    reference reads what we write), ``json_ragged`` where msgpack is not installed."""
    return "msgpack_ragged" if _deps.msgpack_module() is not None else "json_ragged"


def choose_leaf_codec(values):
    present = [v for v in values if v is not None and v is not MISSING]
    if not present:
        return Decision(False, _object_codec(), "no non-null rows")
    torch = _deps.torch_module()
    if torch is not None and all(isinstance(v, torch.Tensor) for v in present):
        dtypes = sorted({str(v.dtype) for v in present})
        if len(dtypes) > 1:
            return Decision(False, "ragged_tensor", f"mixed tensor dtype: {dtypes}")
        return Decision(True, "ragged_tensor", "every row is a tensor")
    if all(isinstance(v, np.ndarray) for v in present):
        if all(v.dtype.kind in "biuf" for v in present):
            return Decision(True, "typed_ragged", "every row is a numeric ndarray")
        return Decision(False, "typed_ragged", "ndarray rows must be numeric")
    if all(_number(v) for v in present):
        return Decision(True, "ndarray", "every row is a numeric scalar")
    if all(isinstance(v, str) for v in present):
        return Decision(True, "utf8_ragged", "every row is a str")
    if all(_bytes_like(v) for v in present):
        return Decision(True, "bytes_ragged", "every row is bytes-like")
    if all(isinstance(v, (list, tuple)) for v in present):
        try:
            arrays = [np.asarray(v) for v in present]
            if all(a.dtype.kind in "biuf" and a.ndim >= 1 for a in arrays):
                return Decision(True, "typed_ragged", "every row is a sequence of numbers")
        except (ValueError, TypeError):
            pass
    if all(isinstance(v, (dict, list, tuple)) for v in present):
        if any(has_leaf(v) for v in present):
            return Decision(True, "structured_recursive",
                            "rows are containers holding tensors, ndarrays or bytes")
        if all(_json_like(v) for v in present):
            return Decision(True, _object_codec(), "every row is JSON-like")
        return Decision(False, _object_codec(), "containers hold values JSON cannot carry")
    kinds = sorted({type(v).__name__ for v in present})
    return Decision(False, _object_codec(), f"no codec for rows of type {kinds}")


def infer_structure(path, values, leaves, nodes, _depth=0):
    """Append the nodes and leaves of rows ``values`` at ``path`` to ``leaves`` / ``nodes``."""
    if _depth > MAX_DEPTH:
        raise ValueError(f"structured value at {path} is nested deeper than {MAX_DEPTH}")
    present = [v for v in values if v is not None and v is not MISSING]
    if present and all(isinstance(v, dict) for v in present):
        keys = list(dict.fromkeys(k for v in present for k in v))
        if len(keys) <= MAX_STRUCT_KEYS and all(isinstance(k, str) for k in keys):
            nodes.append(Node(path, "dict", keys, None,
                              [isinstance(v, dict) for v in values]))
            for key in keys:
                child = [v.get(key, MISSING) if isinstance(v, dict) else v for v in values]
                child = [None if c is MISSING and not isinstance(v, dict) else c
                         for c, v in zip(child, values)]
                infer_structure(f"{path}.{escape_key(key)}", child, leaves, nodes, _depth + 1)
            return
    if present and all(isinstance(v, (list, tuple)) for v in present):
        longest = max(len(v) for v in present)
        items = [x for v in present for x in v]
        if longest <= MAX_LIST_LEN and any(isinstance(x, (dict, list, tuple)) for x in items):
            nodes.append(Node(path, "list", list(range(longest)),
                              [len(v) if isinstance(v, (list, tuple)) else 0 for v in values],
                              [isinstance(v, (list, tuple)) for v in values]))
            for i in range(longest):
                child = [(v[i] if i < len(v) else MISSING) if isinstance(v, (list, tuple)) else v
                         for v in values]
                infer_structure(f"{path}[{i}]", child, leaves, nodes, _depth + 1)
            return
    leaves.append(Leaf(path, list(values), choose_leaf_codec(values)))


__all__ = ["Decision", "Leaf", "MISSING", "Node", "choose_leaf_codec", "escape_key",
           "infer_structure"]
