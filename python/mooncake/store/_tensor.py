"""The tensor methods of MooncakeDistributedStore (put_tensor, get_tensor, their batch, TP,
parallelism, ``*_from`` / ``*_into`` forms, pub_tensor and the safetensors pair); ``_methods.py``
lists them and adds them to the type, with their upsert forms (``upsert_form``).

A tensor object is the reference Mooncake's byte layout: a 304-byte little-endian header
(``TensorMetadata``: magic, version, dtype code, ndim, layout kind, data offset and length, the
global and local shapes, up to four parallel axes) followed by the tensor's bytes in C order.
Objects written here read back in the reference and the other way round.

The bytes move through the store's own calls: a put hands the header and the tensor's memory to
``batch_put_from_multi_buffers`` as pointers (TP shards of a contiguous tensor as pointer ranges
into it, so nothing is copied here); a get wraps the store's read buffer (``get_buffer``) or the
caller's buffer (``get_into``) in a tensor without a copy. torch and safetensors are imported on
the first call that needs them, never by ``import mooncake.store``.

Return conventions are the reference's: puts return 0 or a negative code (``INVALID_PARAMS`` for
a bad tensor or argument value), gets return a tensor or None, batch forms a list with one entry
per key. A key that is not a str raises TypeError, as the other store methods do.
"""

import ctypes
import os

from mooncake import _store
from mooncake.store._extras import checked_property

__all__ = ["ParallelAxis", "TensorParallelism", "ReadTarget"]

# The codes these methods answer themselves, from the C error table.
INVALID_PARAMS = _store.ERR_INVALID_PARAMS
FILE_NOT_FOUND = _store.ERR_FILE_NOT_FOUND
OBJECT_ALREADY_EXISTS = _store.ERR_OBJECT_ALREADY_EXISTS

# ---- the stored layout (the reference's integration_utils.h, same field order and sizes) ----

_MAGIC = 0x4D4F4F4E
_VERSION = 1
_MAX_DIMS = 8
_MAX_AXES = 4
_FULL, _SHARD = 0, 1
_MANIFEST_MAGIC = 0x574D414E
_MANIFEST_VERSION = 1

# Axis kinds: their stored numbers and the order a key names them in.
_KIND_CODE = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}
_KIND_NAME = {v: k for k, v in _KIND_CODE.items()}


class _Header(ctypes.LittleEndianStructure):
    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint16),
                ("header_size", ctypes.c_uint16), ("dtype", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("layout_kind", ctypes.c_uint32),
                ("reserved_flags", ctypes.c_uint32), ("data_offset", ctypes.c_uint64),
                ("data_bytes", ctypes.c_uint64)]


class _Axis(ctypes.LittleEndianStructure):
    _fields_ = [("kind", ctypes.c_int32), ("axis_index", ctypes.c_int32),
                ("shard_rank", ctypes.c_int32), ("shard_count", ctypes.c_int32),
                ("split_dim", ctypes.c_int32), ("reserved0", ctypes.c_int32),
                ("reserved1", ctypes.c_int64)]


class _Layout(ctypes.LittleEndianStructure):
    _fields_ = [("global_shape", ctypes.c_int64 * _MAX_DIMS),
                ("local_shape", ctypes.c_int64 * _MAX_DIMS), ("axis_count", ctypes.c_uint32),
                ("reserved0", ctypes.c_uint32), ("axes", _Axis * _MAX_AXES)]


class _Meta(ctypes.LittleEndianStructure):
    _fields_ = [("header", _Header), ("layout", _Layout)]


class _ManifestHeader(ctypes.LittleEndianStructure):
    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint16),
                ("header_size", ctypes.c_uint16), ("dtype", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("split_dim", ctypes.c_int32),
                ("shard_count", ctypes.c_int32), ("reserved0", ctypes.c_int32)]


class _Manifest(ctypes.LittleEndianStructure):
    _fields_ = [("header", _ManifestHeader), ("global_shape", ctypes.c_int64 * _MAX_DIMS)]


META_SIZE = ctypes.sizeof(_Meta)
assert META_SIZE == 304 and ctypes.sizeof(_Manifest) == 96

# dtype codes 0..14, in the reference's order; element sizes follow from torch.
_DTYPE_NAMES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")

_torch = None
_codes = None  # torch dtype -> code
_dtypes = None  # code -> torch dtype (None where this torch lacks it)


def _t():
    """torch, imported on first use (never by ``import mooncake.store``)."""
    global _torch, _codes, _dtypes
    if _torch is None:
        try:
            import torch
        except ImportError as e:  # the tensor API without its extra
            raise ImportError("the tensor methods need torch: pip install 'mooncake-c[tensor]'"
                              ) from e
        _dtypes = [getattr(torch, n, None) for n in _DTYPE_NAMES]
        _codes = {d: i for i, d in enumerate(_dtypes) if d is not None}
        _torch = torch
    return _torch


def _check_key(key, what="key"):
    if not isinstance(key, str):
        raise TypeError(f"{what} must be str, not {type(key).__name__}")


def _check_keys(keys, what="keys"):
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"{what} must be a list of str")
    keys = list(keys)
    for k in keys:
        _check_key(k, what + "[i]")
    return keys


def _shape(dims, ndim):
    return tuple(int(dims[i]) for i in range(ndim))


def _fill_shape(arr, shape):
    for i in range(_MAX_DIMS):
        arr[i] = shape[i] if i < len(shape) else -1


def _nbytes(code, shape):
    n = 1
    for d in shape:
        n *= d
    return n * _t().tensor([], dtype=_dtypes[code]).element_size()


def _build_meta(code, global_shape, local_shape, nbytes, axes=()):
    """A header: FULL without axes, SHARD with them (``axes``: _AxisSpec list)."""
    m = _Meta()
    h = m.header
    h.magic, h.version, h.header_size = _MAGIC, _VERSION, META_SIZE
    h.dtype, h.ndim = code, len(global_shape)
    h.layout_kind = _SHARD if axes else _FULL
    h.data_offset, h.data_bytes = META_SIZE, nbytes
    _fill_shape(m.layout.global_shape, global_shape)
    _fill_shape(m.layout.local_shape, local_shape)
    m.layout.axis_count = len(axes)
    for i, a in enumerate(axes):
        s = m.layout.axes[i]
        s.kind, s.axis_index = _KIND_CODE[a.kind], i
        s.shard_rank, s.shard_count = a.rank, a.size
        s.split_dim = -1 if a.split_dim is None else a.split_dim
        s.reserved0 = (a.expert_id or 0) if a.kind == "ep" else \
            (a.stage_id or 0) if a.kind == "pp" else 0
        s.reserved1 = local_shape[a.split_dim] if a.split_dim is not None else 0
    return m


def _parse_meta(mv):
    """The validated header of a stored tensor object (a buffer), or None."""
    total = len(mv)
    if total < META_SIZE:
        return None
    m = _Meta.from_buffer_copy(mv[:META_SIZE])
    h, lay = m.header, m.layout
    if (h.magic != _MAGIC or h.version != _VERSION or h.header_size != META_SIZE
            or not 0 <= h.dtype < len(_DTYPE_NAMES) or not 0 <= h.ndim <= _MAX_DIMS
            or lay.axis_count > _MAX_AXES or h.layout_kind > _SHARD
            or not META_SIZE <= h.data_offset <= total or h.data_bytes != total - h.data_offset):
        return None
    if any(lay.global_shape[i] < 0 or lay.local_shape[i] < 0 for i in range(h.ndim)):
        return None
    if any(lay.global_shape[i] != -1 or lay.local_shape[i] != -1
           for i in range(h.ndim, _MAX_DIMS)):
        return None
    _t()
    if _dtypes[h.dtype] is None:  # a dtype this torch lacks
        return None
    if h.data_bytes != _nbytes(h.dtype, _shape(lay.local_shape, h.ndim)):
        return None
    for i in range(lay.axis_count):
        a = lay.axes[i]
        if (a.kind not in _KIND_NAME and a.kind != 4) or a.shard_count <= 0 \
                or not 0 <= a.shard_rank < a.shard_count or not -1 <= a.split_dim < h.ndim:
            return None
    return m


def _tensor_from(buf, m):
    """A tensor over buf's bytes (no copy; it keeps buf alive), shaped by header m."""
    torch = _t()
    shape = _shape(m.layout.local_shape, m.header.ndim)
    dtype = _dtypes[m.header.dtype]
    if m.header.data_bytes == 0:
        return torch.empty(shape, dtype=dtype)
    n = 1
    for d in shape:
        n *= d
    return torch.frombuffer(buf, dtype=dtype, count=n,
                            offset=m.header.data_offset).reshape(shape)


def _decode(buf):
    """Buffer (store read result, ctypes array) -> tensor or None."""
    if buf is None:
        return None
    m = _parse_meta(memoryview(buf).cast("B"))
    return None if m is None else _tensor_from(buf, m)


def _at(ptr, n):
    """n bytes of caller memory at ptr, as a writable buffer (no copy, no ownership)."""
    return (ctypes.c_char * n).from_address(ptr)


# ---- the write side ----


class _Write:
    """One object to write: a header and the (pointer, length) ranges of its data, with the
    objects that keep that memory alive."""

    __slots__ = ("meta", "ranges", "keep")

    def __init__(self, meta, ranges, keep):
        self.meta, self.ranges, self.keep = meta, ranges, keep

    def parts(self):
        ptrs = [ctypes.addressof(self.meta)] + [p for p, n in self.ranges if n]
        sizes = [META_SIZE] + [n for p, n in self.ranges if n]
        return ptrs, sizes


def _host(tensor):
    """The tensor as a contiguous CPU tensor with a dtype code, or None (not a tensor, an
    unsupported dtype, more than 8 dims). Copies only what must be: a non-contiguous or
    non-CPU input."""
    torch = _t()
    if not isinstance(tensor, torch.Tensor):
        return None
    code = _codes.get(tensor.dtype)
    if code is None or tensor.dim() > _MAX_DIMS or tensor.is_sparse or tensor.is_quantized:
        return None
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()  # the store moves host memory; a device tensor is staged once
    t = t.resolve_conj().resolve_neg().contiguous()
    return t, code


def _full_write(tensor):
    h = _host(tensor)
    if h is None:
        return None
    t, code = h
    shape = tuple(t.shape)
    nbytes = t.numel() * t.element_size()
    return _Write(_build_meta(code, shape, shape, nbytes), [(t.data_ptr(), nbytes)], t)


def _row_ranges(base, shape, elsize, split_dim, start, extent):
    """The (pointer, length) runs of rows start..start+extent along split_dim of a C-order
    tensor at base: one run per index of the dims before split_dim."""
    before = 1
    for d in shape[:split_dim]:
        before *= d
    after = elsize
    for d in shape[split_dim + 1:]:
        after *= d
    run = extent * after
    if run == 0:
        return []
    return [(base + (i * shape[split_dim] + start) * after, run) for i in range(before)]


def _shard_range(dim, rank, count):
    start = dim * rank // count
    return start, dim * (rank + 1) // count - start


def _uniform(shape, split_dim, count):
    return (isinstance(split_dim, int) and 0 <= split_dim < len(shape) and count > 0
            and shape[split_dim] % count == 0)


def _shard_writes(t, code, count, split_dim, axes_for_rank, ranks=None, keep=None):
    """Writes for TP shards of the contiguous CPU tensor t (pointer ranges into it, no copy);
    axes_for_rank(rank) gives each shard's axes. None when the split is not uniform."""
    shape = tuple(t.shape)
    if not _uniform(shape, split_dim, count):
        return None
    elsize = t.element_size()
    out = []
    for r in (range(count) if ranks is None else ranks):
        start, extent = _shard_range(shape[split_dim], r, count)
        local = shape[:split_dim] + (extent,) + shape[split_dim + 1:]
        ranges = _row_ranges(t.data_ptr(), shape, elsize, split_dim, start, extent)
        nbytes = sum(n for _, n in ranges)
        out.append(_Write(_build_meta(code, shape, local, nbytes, axes_for_rank(r)), ranges,
                          t if keep is None else keep))
    return out


def _tp_axes(count, split_dim):
    return lambda r: [_AxisSpec("tp", r, count, split_dim)]


def _put_writes(store, keys, writes, config):
    """One batch put of every write that is not None; a code per key."""
    res = [INVALID_PARAMS] * len(keys)
    idx = [i for i, w in enumerate(writes) if w is not None]
    if not idx:
        return res
    if len(idx) == 1:  # put_parts: views of the same memory (no copy), and the call's own code
        ptrs, sizes = writes[idx[0]].parts()
        res[idx[0]] = store.put_parts(keys[idx[0]], *[_at(p, n) for p, n in zip(ptrs, sizes)],
                                      config=config)
        return res
    ptrs, sizes = zip(*(writes[i].parts() for i in idx))
    codes = store.batch_put_from_multi_buffers([keys[i] for i in idx], list(ptrs), list(sizes),
                                               config)
    for i, c in zip(idx, codes):
        res[i] = c
    return res


def _first_error(codes):
    for c in codes:
        if c != 0:
            return c
    return 0


def _config_ok(config):
    """The reference's check: preferred_segments, when given, name one segment per replica."""
    if config is None:
        return True
    pref = getattr(config, "preferred_segments", None) or []
    return not pref or len(pref) == getattr(config, "replica_num", 1)


def _tp_key(key, rank):
    return f"{key}_tp_{rank}"


# ---- put / get ----


def put_tensor(self, key, tensor):
    """Stores a tensor (any CPU or device tensor of a supported dtype, up to 8 dims) under key:
    0 or a negative code (INVALID_PARAMS for something that is not a supported tensor)."""
    return _put_one(self, key, tensor, None)


def _put_one(store, key, tensor, config):
    _check_key(key)
    return _put_writes(store, [key], [_full_write(tensor)], config)[0]


def _put_many(store, keys, tensors, config):
    keys = _check_keys(keys)
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if tensors is None or not keys or len(tensors) != len(keys):
        return [INVALID_PARAMS] * len(keys)
    return _put_writes(store, keys, [_full_write(t) for t in tensors], config)


def batch_put_tensor(self, keys, tensors_list):
    """put_tensor for each key, in one batch: a code per key."""
    return _put_many(self, keys, tensors_list, None)


def get_tensor(self, key):
    """The tensor stored under key, or None (missing, or not a tensor object). It shares the
    store's read buffer, which it keeps alive."""
    _check_key(key)
    return _decode(self.get_buffer(key))


def batch_get_tensor(self, keys):
    """get_tensor for each key, in one batch read."""
    keys = _check_keys(keys)
    return [_decode(b) for b in self.batch_get_buffer(keys)]


def get_tensor_into(self, key, buffer_ptr, size):
    """Reads key's tensor object into the caller's buffer (size bytes at buffer_ptr) and
    returns a tensor over that memory (the caller keeps it alive), or None."""
    _check_key(key)
    if not buffer_ptr:
        return None
    n = self.get_into(key, buffer_ptr, size)
    return None if n < 0 else _decode(_at(buffer_ptr, n))


def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
    """get_tensor_into for each key, in one batch read. Lists of unequal length or a null
    pointer: INVALID_PARAMS for every key, as the reference answers."""
    keys = _check_keys(keys)
    buffer_ptrs, sizes = list(buffer_ptrs), list(sizes)
    if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys) or not all(buffer_ptrs):
        return [INVALID_PARAMS] * len(keys)
    lens = self.batch_get_into(keys, buffer_ptrs, sizes)
    return [None if n < 0 else _decode(_at(p, n)) for p, n in zip(buffer_ptrs, lens)]


def _valid_object(store, ptr, size):
    # The header is read here, before the store's own call would check the address: a wild one
    # must be refused by the store's check first, not found out by a fault.
    return bool(ptr) and size >= META_SIZE and store._check_memory(ptr, size) == 0 and \
        _parse_meta(memoryview(_at(ptr, size))) is not None


def put_tensor_from(self, key, buffer_ptr, size):
    """Stores size bytes at buffer_ptr, which must be a whole tensor object (header + data,
    as get_tensor_into leaves it), without a copy: 0 or a negative code."""
    _check_key(key)
    if not _valid_object(self, buffer_ptr, size):
        return INVALID_PARAMS
    return self.put_from(key, buffer_ptr, size)


def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
    """put_tensor_from for each key in one batch; any bad buffer fails them all."""
    keys = _check_keys(keys)
    if not keys:
        return []
    buffer_ptrs, sizes = list(buffer_ptrs), list(sizes)
    if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys) or \
            not all(_valid_object(self, p, n) for p, n in zip(buffer_ptrs, sizes)):
        return [INVALID_PARAMS] * len(keys)
    return self.batch_put_from(keys, buffer_ptrs, sizes)


# ---- tensor parallelism: a tensor split evenly along split_dim, shard r under key_tp_r ----


def _tp_writes(tensor, tp_size, split_dim):
    h = _host(tensor)
    if h is None:
        return None
    return _shard_writes(h[0], h[1], tp_size, split_dim, _tp_axes(tp_size, split_dim))


def _put_tp(store, key, tensor, tp_size, split_dim, config):
    _check_key(key)
    if tp_size <= 1:
        return _put_one(store, key, tensor, config)
    writes = _tp_writes(tensor, tp_size, split_dim)
    if writes is None:
        return INVALID_PARAMS
    return _first_error(_put_writes(store, [_tp_key(key, r) for r in range(tp_size)], writes,
                                    config))


def _put_tp_many(store, base_keys, tensors, tp_size, split_dim, config):
    if tp_size <= 1:
        return _put_many(store, base_keys, tensors, config)
    base_keys = _check_keys(base_keys, "base_keys")
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if tensors is None or not base_keys or len(tensors) != len(base_keys):
        return [INVALID_PARAMS] * len(base_keys)
    return _put_tp_shards(store, base_keys, [_tp_writes(t, tp_size, split_dim) for t in tensors],
                          tp_size, config)


def _put_tp_shards(store, base_keys, shard_writes, tp_size, config):
    """Puts the tp_size shard writes of every base key (None: a bad one) in one batch under
    ``key_tp_r``: a code per base key, its first failing shard's."""
    keys, writes, owner = [], [], []
    res = [INVALID_PARAMS] * len(base_keys)
    for i, (k, ws) in enumerate(zip(base_keys, shard_writes)):
        if ws is None:
            continue
        res[i] = 0
        keys += [_tp_key(k, r) for r in range(tp_size)]
        writes += ws
        owner += [i] * tp_size
    for i, c in zip(owner, _put_writes(store, keys, writes, config) if keys else []):
        if c != 0 and res[i] == 0:
            res[i] = c
    return res


def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
    """Splits tensor into tp_size equal shards along split_dim and stores shard r under
    ``key_tp_r`` (every rank's, in one batch; tp_rank is accepted for the reference's
    signature). tp_size <= 1 is put_tensor. 0 or the first failing shard's code."""
    return _put_tp(self, key, tensor, tp_size, split_dim, None)


def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0):
    """put_tensor_with_tp for each key, all shards in one batch: a code per base key."""
    return _put_tp_many(self, base_keys, tensors_list, tp_size, split_dim, None)


def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
    """Shard tp_rank of a tensor stored with put_tensor_with_tp (key itself when
    tp_size <= 1), or None."""
    _check_key(key)
    return get_tensor(self, key if tp_size <= 1 else _tp_key(key, tp_rank))


def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
    """get_tensor_with_tp for each base key, in one batch read."""
    base_keys = _check_keys(base_keys, "base_keys")
    return batch_get_tensor(self, base_keys if tp_size <= 1 else
                            [_tp_key(k, tp_rank) for k in base_keys])


def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
    """get_tensor_with_tp into the caller's buffer (see get_tensor_into)."""
    _check_key(key)
    return get_tensor_into(self, key if tp_size <= 1 else _tp_key(key, tp_rank), buffer_ptr,
                           size)


def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1):
    """batch_get_tensor_into of each base key's shard tp_rank."""
    base_keys = _check_keys(base_keys, "base_keys")
    return batch_get_tensor_into(self, base_keys if tp_size <= 1 else
                                 [_tp_key(k, tp_rank) for k in base_keys], buffer_ptrs, sizes)


def _raw_shard_writes(store, ptr, size, count, split_dim, axes_for_rank):
    """TP shard writes straight from a full tensor object in caller memory (pointer ranges
    into it, no copy), or None."""
    if not _valid_object(store, ptr, size):
        return None
    buf = _at(ptr, size)
    t = _tensor_from(buf, _parse_meta(memoryview(buf)))
    return _shard_writes(t, _codes[t.dtype], count, split_dim, axes_for_rank, keep=buf)


def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
    """put_tensor_with_tp of the full tensor object at buffer_ptr; the shards are stored from
    that memory directly."""
    _check_key(key)
    if not buffer_ptr or size < META_SIZE:
        return INVALID_PARAMS
    if tp_size <= 1:
        return put_tensor_from(self, key, buffer_ptr, size)
    writes = _raw_shard_writes(self, buffer_ptr, size, tp_size, split_dim,
                              _tp_axes(tp_size, split_dim))
    if writes is None:
        return INVALID_PARAMS
    return _first_error(_put_writes(self, [_tp_key(key, r) for r in range(tp_size)], writes,
                                    None))


def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1,
                                  split_dim=0):
    """put_tensor_with_tp_from for each base key: a code per base key."""
    base_keys = _check_keys(base_keys, "base_keys")
    if tp_size <= 1:
        return batch_put_tensor_from(self, base_keys, buffer_ptrs, sizes)
    buffer_ptrs, sizes = list(buffer_ptrs), list(sizes)
    if not base_keys or len(buffer_ptrs) != len(base_keys) or len(sizes) != len(base_keys):
        return [INVALID_PARAMS] * len(base_keys)
    axes = _tp_axes(tp_size, split_dim)
    return _put_tp_shards(self, base_keys,
                          [_raw_shard_writes(self, p, n, tp_size, split_dim, axes)
                           for p, n in zip(buffer_ptrs, sizes)], tp_size, None)


# ---- pub: the same writes with a ReplicateConfig ----


def pub_tensor(self, key, tensor, config=None):
    """put_tensor with a ReplicateConfig (None: the default placement)."""
    _check_key(key)
    if not _config_ok(config):
        return INVALID_PARAMS
    return _put_one(self, key, tensor, config)


def batch_pub_tensor(self, keys, tensors_list, config=None):
    """batch_put_tensor with a ReplicateConfig."""
    if not _config_ok(config):
        return [INVALID_PARAMS] * len(_check_keys(keys))
    return _put_many(self, keys, tensors_list, config)


def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
    """put_tensor_with_tp with a ReplicateConfig."""
    _check_key(key)
    if not _config_ok(config):
        return INVALID_PARAMS
    return _put_tp(self, key, tensor, tp_size, split_dim, config)


def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0, tp_size=1,
                             split_dim=0):
    """batch_put_tensor_with_tp with a ReplicateConfig."""
    if not _config_ok(config):
        return [INVALID_PARAMS] * len(_check_keys(base_keys, "base_keys"))
    return _put_tp_many(self, base_keys, tensors_list, tp_size, split_dim, config)


# ---- safetensors ----


def _safetensors():
    try:
        import safetensors.torch as st
    except ImportError as e:
        raise ImportError("safetensors files need the safetensors package: "
                          "pip install 'mooncake-c[tensor]'") from e
    return st


def save_tensor_to_safetensor(self, key, file_name=None):
    """Writes key's tensor to a safetensors file (named file_name, or key) as the entry key:
    0, FILE_NOT_FOUND when the store has no tensor under key, INVALID_PARAMS when the file
    cannot be written."""
    _check_key(key)
    if file_name is not None and not isinstance(file_name, (str, os.PathLike)):
        raise TypeError("file_name must be str or a path")
    st = _safetensors()
    tensor = get_tensor(self, key)
    if tensor is None:
        return FILE_NOT_FOUND
    try:
        st.save_file({key: tensor}, os.fspath(key if file_name is None else file_name))
    except Exception:  # noqa: BLE001 - any failure to write (safetensors' own errors too)
        return INVALID_PARAMS
    return 0


def load_tensor_from_safetensor(self, key=None, file_name=None):
    """Reads a safetensors file and stores one of its tensors under key (default: file_name):
    the entry named key, else the file's first entry. The tensor, or None (no such file, an
    empty or unreadable one, or the put failed)."""
    if file_name is None:
        raise TypeError("load_tensor_from_safetensor() missing required argument 'file_name'")
    if not isinstance(file_name, (str, os.PathLike)):
        raise TypeError("file_name must be str or a path")
    if key is not None:
        _check_key(key)
    st = _safetensors()
    try:
        loaded = st.load_file(os.fspath(file_name))
    except Exception:  # noqa: BLE001 - a missing or corrupt file answers None, as the reference
        return None
    if not loaded:
        return None
    target = os.fspath(file_name) if key is None else key
    tensor = loaded[key] if key is not None and key in loaded else next(iter(loaded.values()))
    return tensor if _put_one(self, target, tensor, None) == 0 else None


# ---- the unified parallelism API (ParallelAxis / TensorParallelism / ReadTarget) ----


class ParallelAxis:
    """One parallel axis of a shard: kind ("tp", "dp", "ep", "pp"), this shard's rank of size,
    and split_dim (TP), expert_id (EP) or stage_id (PP)."""

    __slots__ = ("kind", "rank", "size", "split_dim", "expert_id", "stage_id")

    def __init__(self, kind="", rank=0, size=1, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def __repr__(self):
        return (f"ParallelAxis(kind={self.kind!r}, rank={self.rank}, size={self.size}, "
                f"split_dim={self.split_dim}, expert_id={self.expert_id}, "
                f"stage_id={self.stage_id})")


class TensorParallelism:
    """The axes that identify one shard (at most one per kind, at most four)."""

    __slots__ = ("axes",)

    def __init__(self, axes=None):
        self.axes = list(axes) if axes else []

    def __repr__(self):
        return f"TensorParallelism(axes={self.axes!r})"


class ReadTargetModeError(ValueError, RuntimeError):
    """An unknown ReadTarget mode (a ValueError; also a RuntimeError, which the reference
    raises)."""


_MODES = ("as_stored", "shard", "full")


def _read_mode(value):
    if not isinstance(value, str) or value.lower() not in _MODES:
        raise ReadTargetModeError(f"Unsupported ReadTarget mode: {value!r}")
    return value.lower()


class ReadTarget:
    """What a read wants: "as_stored" (the object under the key itself), "shard" (the shard
    named by parallelism, resharded from the stored shards when needed) or "full" (the whole
    tensor rebuilt from its shards)."""

    __slots__ = ("_mode", "parallelism")

    def __init__(self, mode="as_stored", parallelism=None):
        self.mode = mode
        self.parallelism = parallelism

    mode = checked_property("_mode", _read_mode)

    def __repr__(self):
        return f"ReadTarget(mode={self._mode!r}, parallelism={self.parallelism!r})"


class _AxisSpec:
    """A validated axis (plain ints, lower-case kind)."""

    __slots__ = ("kind", "rank", "size", "split_dim", "expert_id", "stage_id")

    def __init__(self, kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def key(self):
        return (self.kind, self.rank, self.size, self.split_dim, self.expert_id, self.stage_id)

    def with_rank(self, rank, size=None):
        return _AxisSpec(self.kind, rank, self.size if size is None else size, self.split_dim,
                         self.expert_id, self.stage_id)


def _opt_int(v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError
    return v


def _parse_parallelism(obj):
    """A TensorParallelism-like object -> validated, canonically ordered _AxisSpec list, or
    None (the reference's rules: known kinds, each once, 0 <= rank < size, TP with split_dim,
    EP with expert_id, PP with stage_id, DP/EP/PP without split_dim)."""
    axes = getattr(obj, "axes", None)
    if axes is None or isinstance(axes, (str, bytes)):
        return None
    try:
        axes = list(axes)
    except TypeError:
        return None
    if not 1 <= len(axes) <= _MAX_AXES:
        return None
    out, seen = [], set()
    for a in axes:
        try:
            kind = getattr(a, "kind").lower()
            spec = _AxisSpec(kind, _opt_int(a.rank), _opt_int(a.size),
                             _opt_int(getattr(a, "split_dim", None)),
                             _opt_int(getattr(a, "expert_id", None)),
                             _opt_int(getattr(a, "stage_id", None)))
        except (AttributeError, TypeError):
            return None
        if kind not in _KIND_CODE or kind in seen or spec.size is None or spec.rank is None \
                or spec.size <= 0 or not 0 <= spec.rank < spec.size:
            return None
        seen.add(kind)
        if kind == "tp" and spec.split_dim is None:
            return None
        if kind != "tp" and spec.split_dim is not None:
            return None
        if (kind == "ep" and spec.expert_id is None) or (kind == "pp" and spec.stage_id is None):
            return None
        out.append(spec)
    out.sort(key=lambda s: _KIND_CODE[s.kind])
    return out


def _tp_of(axes):
    for i, a in enumerate(axes):
        if a.kind == "tp":
            return i
    return None


def _axis_suffix(a):
    s = f"{a.kind}_{a.rank}of{a.size}"
    if a.split_dim is not None:
        s += f"_sd{a.split_dim}"
    if a.expert_id is not None:
        s += f"_eid{a.expert_id}"
    if a.stage_id is not None:
        s += f"_sid{a.stage_id}"
    return s


def _parallelism_key(key, axes):
    """A lone TP axis keeps the TP API's key (key_tp_r); otherwise key__<axis>__<axis>...
    in the order DP, TP, EP, PP."""
    if len(axes) == 1 and axes[0].kind == "tp":
        return _tp_key(key, axes[0].rank)
    return key + "".join("__" + _axis_suffix(a) for a in axes)


def _manifest_key(key):
    return key + "__parallelism_manifest"


def _writer_manifest_key(key):
    return key + "__writer_manifest"


def _writer_key(key, rank, size, split_dim):
    return f"{key}__writer_{rank}of{size}_sd{split_dim}"


def _axes_of_meta(m):
    """The stored axes of a SHARD header, canonically ordered, or None."""
    if m.header.layout_kind != _SHARD:
        return None
    out = []
    for i in range(m.layout.axis_count):
        a = m.layout.axes[i]
        kind = _KIND_NAME.get(a.kind)
        if kind is None:
            return None
        out.append(_AxisSpec(kind, a.shard_rank, a.shard_count,
                             a.split_dim if a.split_dim >= 0 else None,
                             a.reserved0 if kind == "ep" else None,
                             a.reserved0 if kind == "pp" else None))
    out.sort(key=lambda s: _KIND_CODE[s.kind])
    return out


def _same_axes(a, b):
    return a is not None and b is not None and [x.key() for x in a] == [y.key() for y in b]


def _build_manifest(code, global_shape, split_dim, count):
    m = _Manifest()
    h = m.header
    h.magic, h.version, h.header_size = _MANIFEST_MAGIC, _MANIFEST_VERSION, ctypes.sizeof(m)
    h.dtype, h.ndim, h.split_dim, h.shard_count = code, len(global_shape), split_dim, count
    _fill_shape(m.global_shape, global_shape)
    return m


def _parse_manifest(buf):
    if buf is None or len(buf) != ctypes.sizeof(_Manifest):
        return None
    m = _Manifest.from_buffer_copy(memoryview(buf).cast("B"))
    h = m.header
    if h.magic != _MANIFEST_MAGIC or h.version != _MANIFEST_VERSION or \
            h.header_size != ctypes.sizeof(m) or not 0 <= h.ndim <= _MAX_DIMS or \
            h.shard_count <= 0 or not 0 <= h.split_dim < h.ndim or \
            not 0 <= h.dtype < len(_DTYPE_NAMES):
        return None
    shape = _shape(m.global_shape, h.ndim)
    if any(d < 0 for d in shape):
        return None
    return shape, h.split_dim, h.shard_count, h.dtype


def _put_manifest(store, key, code, global_shape, split_dim, count, config):
    """Every writer of a key writes the same manifest; the first one stays (a put of an
    existing key answers 0 or OBJECT_ALREADY_EXISTS, and either is success here)."""
    m = _build_manifest(code, global_shape, split_dim, count)
    rc = store.put_from(key, ctypes.addressof(m), ctypes.sizeof(m), config)
    return 0 if rc == OBJECT_ALREADY_EXISTS else rc


def _write_parallel(store, key, t, code, axes, config, full_input):
    """The parallelism write routes of the reference, for a contiguous CPU tensor t:
    a lone TP axis stores t as this rank's shard (the global shape is t's with split_dim
    times size) under key_tp_r; TP with other axes stores this rank's shard of the full
    tensor t; no TP axis stores t as it is, with the axes in its header. TP writes also
    store the manifest (global shape, split_dim, shard count) that full reads use.
    full_input (the ``_from`` forms): t is the full tensor and every TP rank is stored."""
    tp = _tp_of(axes)
    shape = tuple(t.shape)
    if tp is None:
        nbytes = t.numel() * t.element_size()
        w = _Write(_build_meta(code, shape, shape, nbytes, axes), [(t.data_ptr(), nbytes)], t)
        return _put_writes(store, [_parallelism_key(key, axes)], [w], config)[0]
    ax = axes[tp]
    d = ax.split_dim
    if d >= len(shape):
        return INVALID_PARAMS

    def axes_for(r):
        return [a.with_rank(r) if i == tp else a for i, a in enumerate(axes)]

    if len(axes) == 1 and not full_input:
        gshape = shape[:d] + (shape[d] * ax.size,) + shape[d + 1:]
        nbytes = t.numel() * t.element_size()
        w = _Write(_build_meta(code, gshape, shape, nbytes, axes), [(t.data_ptr(), nbytes)], t)
        keys, writes = [_parallelism_key(key, axes)], [w]
    else:
        gshape = shape
        ranks = range(ax.size) if full_input else [ax.rank]
        writes = _shard_writes(t, code, ax.size, d, axes_for, ranks=ranks)
        if writes is None:
            return INVALID_PARAMS
        keys = [_parallelism_key(key, axes_for(r)) for r in ranks]
    rc = _first_error(_put_writes(store, keys, writes, config))
    if rc != 0:
        return rc
    return _put_manifest(store, _manifest_key(key), code, gshape, d, ax.size, config)


def _writer_partition(obj, ndim_shape):
    try:
        r, s, d = obj.rank, obj.size, obj.split_dim
    except AttributeError:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (r, s, d)):
        return None
    if s <= 0 or not 0 <= r < s or not _uniform(ndim_shape, d, s):
        return None
    return r, s, d


def _write_writer_partition(store, key, t, code, wp, config):
    """writer_partition: this writer's shard of the full tensor t under
    key__writer_<r>of<s>_sd<d>, plus the writer manifest."""
    parsed = _writer_partition(wp, tuple(t.shape))
    if parsed is None:
        return INVALID_PARAMS
    r, s, d = parsed
    writes = _shard_writes(t, code, s, d, _tp_axes(s, d), ranks=[r])
    rc = _put_writes(store, [_writer_key(key, r, s, d)], writes, config)[0]
    if rc != 0:
        return rc
    return _put_manifest(store, _writer_manifest_key(key), code, tuple(t.shape), d, s, config)


def _put_with_parallelism(store, key, tensor, parallelism, config, writer_partition):
    _check_key(key)
    if parallelism is not None and writer_partition is not None:
        return INVALID_PARAMS
    if not _config_ok(config):
        return INVALID_PARAMS
    if parallelism is None and writer_partition is None:
        return _put_one(store, key, tensor, config)
    h = _host(tensor)
    if h is None:
        return INVALID_PARAMS
    if writer_partition is not None:
        return _write_writer_partition(store, key, h[0], h[1], writer_partition, config)
    axes = _parse_parallelism(parallelism)
    if axes is None:
        return INVALID_PARAMS
    return _write_parallel(store, key, h[0], h[1], axes, config, False)


def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                writer_partition=None):
    """Stores a tensor described by a TensorParallelism (see ReadTarget for reading it back)
    or a writer_partition (rank, size, split_dim: this writer's part of the full tensor);
    neither is put_tensor. 0 or a negative code."""
    return _put_with_parallelism(self, key, tensor, parallelism, config, writer_partition)


def _per_item(keys, n_values, lists):
    """Validates a batch's optional per-key request lists; None when one is malformed."""
    out = []
    for lst in lists:
        if lst is None:
            out.append([None] * len(keys))
        elif not isinstance(lst, list) or len(lst) != len(keys):
            return None
        else:
            out.append(lst)
    return out if n_values == len(keys) else None


def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None,
                                      writer_partitions=None):
    """put_tensor_with_parallelism for each key: a code per key."""
    keys = _check_keys(keys)
    tensors = list(tensors_list)
    if parallelisms is not None and writer_partitions is not None:
        return [INVALID_PARAMS] * len(keys)
    if parallelisms is None and writer_partitions is None:
        return _put_many(self, keys, tensors, config) if _config_ok(config) else \
            [INVALID_PARAMS] * len(keys)
    lists = _per_item(keys, len(tensors), [parallelisms, writer_partitions])
    if lists is None:
        return [INVALID_PARAMS] * len(keys)
    return [_put_with_parallelism(self, k, t, p, config, w)
            for k, t, p, w in zip(keys, tensors, *lists)]


def _put_with_parallelism_from(store, key, ptr, size, parallelism, config, writer_partition):
    _check_key(key)
    if parallelism is not None and writer_partition is not None:
        return INVALID_PARAMS
    if not _config_ok(config) or not _valid_object(store, ptr, size):
        return INVALID_PARAMS
    if parallelism is None and writer_partition is None:
        return store.put_from(key, ptr, size, config)
    buf = _at(ptr, size)
    t = _tensor_from(buf, _parse_meta(memoryview(buf)))
    code = _codes[t.dtype]
    if writer_partition is not None:
        return _write_writer_partition(store, key, t, code, writer_partition, config)
    axes = _parse_parallelism(parallelism)
    if axes is None:
        return INVALID_PARAMS
    return _write_parallel(store, key, t, code, axes, config, True)


def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None, config=None,
                                     writer_partition=None):
    """put_tensor_with_parallelism of the full tensor object at buffer_ptr, stored from that
    memory; with a TP axis every TP rank's shard is stored, as the reference does."""
    return _put_with_parallelism_from(self, key, buffer_ptr, size, parallelism, config,
                                      writer_partition)


def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None,
                                           config=None, writer_partitions=None):
    """put_tensor_with_parallelism_from for each key: a code per key."""
    keys = _check_keys(keys)
    buffer_ptrs, sizes = list(buffer_ptrs), list(sizes)
    if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys) or \
            (parallelisms is not None and writer_partitions is not None):
        return [INVALID_PARAMS] * len(keys)
    lists = _per_item(keys, len(keys), [parallelisms, writer_partitions])
    if lists is None:
        return [INVALID_PARAMS] * len(keys)
    return [_put_with_parallelism_from(self, k, p, n, par, config, w)
            for k, p, n, par, w in zip(keys, buffer_ptrs, sizes, *lists)]


# ---- parallelism reads ----


def _load(store, key):
    """(tensor, header) of key, or (None, None)."""
    buf = store.get_buffer(key)
    if buf is None:
        return None, None
    m = _parse_meta(memoryview(buf).cast("B"))
    return (None, None) if m is None else (_tensor_from(buf, m), m)


def _gather(store, keys, check):
    """Reads every shard in one batch; check(rank, header) must hold for each. The tensors,
    or None."""
    out = []
    for r, buf in enumerate(store.batch_get_buffer(keys)):
        m = None if buf is None else _parse_meta(memoryview(buf).cast("B"))
        if m is None or not check(r, m):
            return None
        out.append(_tensor_from(buf, m))
    return out


def _shards_fit(shards, global_shape, split_dim, code):
    count = len(shards)
    if not _uniform(global_shape, split_dim, count):
        return False
    want = global_shape[:split_dim] + (global_shape[split_dim] // count,) + \
        global_shape[split_dim + 1:]
    return all(tuple(s.shape) == want and _codes[s.dtype] == code for s in shards)


def _full_from_parallelism(store, key, axes):
    """The full tensor rebuilt from the TP shards of the request's other axes, or None: from
    the manifest when there is one, else from the shards' own headers."""
    tp = _tp_of(axes)
    if tp is None:
        return None
    req = axes[tp]
    man = _parse_manifest(store.get_buffer(_manifest_key(key)))
    if man is not None:
        gshape, d, count, code = man
    elif len(axes) == 1:  # stored by the TP API: shard 0's header tells the layout
        _, m0 = _load(store, _tp_key(key, 0))
        stored = _axes_of_meta(m0) if m0 is not None else None
        if not stored or _tp_of(stored) is None:
            return None
        st = stored[_tp_of(stored)]
        gshape, d, count = _shape(m0.layout.global_shape, m0.header.ndim), st.split_dim, st.size
        code = m0.header.dtype
    else:
        gshape, d, count, code = None, req.split_dim, req.size, None
    if d != req.split_dim or (gshape is not None and not (
            _uniform(gshape, d, count) and _uniform(gshape, d, req.size))):
        return None

    def axes_for(r):
        return [a.with_rank(r, count) if i == tp else a for i, a in enumerate(axes)]

    def check(r, m):
        return _same_axes(_axes_of_meta(m), axes_for(r))

    shards = _gather(store, [_parallelism_key(key, axes_for(r)) for r in range(count)], check)
    if not shards:
        return None
    if gshape is None:  # no manifest: the shards' own global shape
        gshape = tuple(shards[0].shape[:d]) + (shards[0].shape[d] * count,) + \
            tuple(shards[0].shape[d + 1:])
        code = _codes[shards[0].dtype]
    if not _shards_fit(shards, gshape, d, code):
        return None
    return _t().cat(shards, dim=d) if count > 1 else shards[0]


def _full_from_writers(store, key):
    """The full tensor from writer_partition shards, or None when key has no writer manifest
    (then it is read as stored)."""
    man = _parse_manifest(store.get_buffer(_writer_manifest_key(key)))
    if man is None:
        return get_tensor(store, key)
    gshape, d, count, code = man

    def check(r, m):
        stored = _axes_of_meta(m)
        return stored is not None and len(stored) == 1 and \
            stored[0].key() == ("tp", r, count, d, None, None)

    shards = _gather(store, [_writer_key(key, r, count, d) for r in range(count)], check)
    if not shards or not _shards_fit(shards, gshape, d, code):
        return None
    return _t().cat(shards, dim=d) if count > 1 else shards[0]


def _read_target(target):
    """(mode, axes or None), or None for a malformed target."""
    if target is None:
        return "as_stored", None
    try:
        mode, par = target.mode, target.parallelism
    except AttributeError:
        return None
    if not isinstance(mode, str) or mode.lower() not in _MODES:
        return None
    if par is None:
        return mode.lower(), None
    axes = _parse_parallelism(par)
    return None if axes is None else (mode.lower(), axes)


def _get_with_parallelism(store, key, target):
    """(tensor or None, key it can be read from directly or None)."""
    _check_key(key)
    parsed = _read_target(target)
    if parsed is None:
        return None, None
    mode, axes = parsed
    if axes is None:
        if mode == "as_stored":
            return get_tensor(store, key), key
        if mode == "full":
            return _full_from_writers(store, key), None
        return None, None
    if mode == "shard":
        direct = _parallelism_key(key, axes)
        t, m = _load(store, direct)
        if t is not None and _same_axes(_axes_of_meta(m), axes):
            return t, direct
        if len(axes) == 1:  # a writer_partition shard of the same layout
            a = axes[0]
            wkey = _writer_key(key, a.rank, a.size, a.split_dim)
            t, m = _load(store, wkey)
            if t is not None and _same_axes(_axes_of_meta(m), axes):
                return t, wkey
        full = _full_from_parallelism(store, key, axes)
        if full is not None:  # reshard: this rank's part of the rebuilt tensor
            a = axes[_tp_of(axes)]
            if not _uniform(tuple(full.shape), a.split_dim, a.size):
                return None, None
            start, extent = _shard_range(full.shape[a.split_dim], a.rank, a.size)
            return full.narrow(a.split_dim, start, extent).contiguous(), None
        if len(axes) == 1:
            return get_tensor(store, direct), direct
        return None, None
    if mode == "full":
        return _full_from_parallelism(store, key, axes), None
    return None, None


def get_tensor_with_parallelism(self, key, target=None):
    """Reads a tensor as a ReadTarget asks (None: as stored): a tensor or None."""
    return _get_with_parallelism(self, key, target)[0]


def _targets(keys, targets):
    if targets is None:
        return [None] * len(keys)
    if not isinstance(targets, list) or len(targets) != len(keys):
        return None
    return targets


def batch_get_tensor_with_parallelism(self, keys, targets=None):
    """get_tensor_with_parallelism for each key (targets: one ReadTarget or None per key)."""
    keys = _check_keys(keys)
    if targets is None:
        return batch_get_tensor(self, keys)
    targets = _targets(keys, targets)
    if targets is None:
        return [None] * len(keys)
    return [get_tensor_with_parallelism(self, k, t) for k, t in zip(keys, targets)]


def _into(store, key, ptr, size, target):
    _check_key(key)
    if not ptr:
        return None
    parsed = _read_target(target)
    if parsed is None:
        return None
    if parsed == ("as_stored", None):
        return get_tensor_into(store, key, ptr, size)
    t, direct = _get_with_parallelism(store, key, target)
    if t is None:
        return None
    if direct is not None:  # one stored object: read it straight into the caller's buffer
        return get_tensor_into(store, direct, ptr, size)
    # A rebuilt tensor: its object is laid into the caller's buffer.
    h = _host(t)
    t = h[0]
    nbytes = t.numel() * t.element_size()
    if META_SIZE + nbytes > size or store._check_memory(ptr, META_SIZE + nbytes, True) != 0:
        return None
    shape = tuple(t.shape)
    m = _build_meta(h[1], shape, shape, nbytes)
    ctypes.memmove(ptr, ctypes.addressof(m), META_SIZE)
    if nbytes:
        ctypes.memmove(ptr + META_SIZE, t.data_ptr(), nbytes)
    return _decode(_at(ptr, META_SIZE + nbytes))


def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
    """get_tensor_with_parallelism into the caller's buffer: a tensor over that memory, or
    None (also when the buffer is too small)."""
    return _into(self, key, buffer_ptr, size, target)


def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
    """get_tensor_with_parallelism_into for each key; malformed lists: None for every key."""
    keys = _check_keys(keys)
    buffer_ptrs, sizes = list(buffer_ptrs), list(sizes)
    if len(buffer_ptrs) != len(keys) or len(sizes) != len(keys):
        return [None] * len(keys)
    if targets is None:
        if not all(buffer_ptrs):
            return [None] * len(keys)
        return batch_get_tensor_into(self, keys, buffer_ptrs, sizes)
    targets = _targets(keys, targets)
    if targets is None:
        return [None] * len(keys)
    return [_into(self, k, p, n, t) for k, p, n, t in zip(keys, buffer_ptrs, sizes, targets)]


# ---- upserts: the put forms above with every store write replacing an existing value ----


class _Upserting:
    """The store seen by the tensor puts, with each write call swapped for its upsert form
    (mooncake/store.h: readers see the old tensor or the new one, whole)."""

    __slots__ = ("_store",)

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_parts(self, key, *parts, config=None):
        return self._store.upsert_parts(key, *parts, config=config)

    def put_from(self, key, buffer_ptr, size, config=None):
        return self._store.upsert_from(key, buffer_ptr, size, config)

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        return self._store.batch_upsert_from(keys, buffer_ptrs, sizes, config)

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, config=None):
        return self._store.batch_upsert_from_multi_buffers(keys, all_buffer_ptrs, all_sizes,
                                                           config)


def upsert_form(put_fn):
    """The upsert method of a tensor put method, under the reference's name (upsert for put,
    upsert_pub for pub): the same arguments and return values."""
    name = put_fn.__name__
    name = name.replace("pub_", "upsert_pub_", 1) if "pub_" in name else \
        name.replace("put", "upsert", 1)

    def upsert_fn(self, *args, **kwargs):
        return put_fn(_Upserting(self), *args, **kwargs)

    upsert_fn.__name__ = name
    upsert_fn.__qualname__ = upsert_fn.__name__
    upsert_fn.__doc__ = (f"{put_fn.__name__}, replacing a value the key already has (insert or "
                         "update): the same arguments and return values.")
    upsert_fn.__wrapped__ = put_fn  # its signature is the put form's (inspect, the stub)
    return upsert_fn


# ---- the reference's module-level helpers (mooncake.store._serialize_tensor, ...) ----


def serialize_tensor(tensor):
    """A tensor's object header and where its bytes are, without writing anything:
    ``(header bytes, data pointer, data byte count, owner)``. ``owner`` keeps the memory at the
    pointer alive (a contiguous CPU copy when the tensor was not one already). The stored
    object is the header followed by the data bytes. TypeError for what is not a tensor this
    store can store."""
    w = _full_write(tensor)
    if w is None:
        raise TypeError("expected a torch.Tensor of a supported dtype with at most "
                        f"{_MAX_DIMS} dimensions, got {type(tensor).__name__}")
    ptr, n = w.ranges[0]
    return bytes(w.meta), ptr, n, w.keep


def tensor_metadata_size():
    """Bytes of a tensor object's header (304, the reference's)."""
    return META_SIZE


def deserialize_tensor(payload):
    """The tensor a tensor object (header + data bytes, e.g. what ``get`` returned) holds, in
    memory of its own. ValueError for bytes that are not a whole tensor object."""
    buf = bytearray(payload)
    t = _decode(buf)
    if t is None:
        raise ValueError(f"not a Mooncake tensor object ({len(buf)} bytes)")
    return t
