"""Structured members: how a value becomes a stored payload plus a field spec, and how a
member (whole, a row slice, or a set of rows) is read back.

Encodings (the field spec's ``encoding``):

- ``ndarray``: a numeric numpy array as C-order bytes; ``dtype`` (numpy ``str``), ``shape``.
- ``torch_tensor``: a dense torch tensor as C-order bytes (``format`` ``"raw"``), ``dtype``
  (``"torch.float32"``), ``shape``; or a caller's tensor-object buffer stored as it is
  (``format`` ``"tensor_object"``, the store's tensor format).
- ``bytes``: a bytes-like value, returned as ``bytes``.

Rows of ``ndarray`` and raw ``torch_tensor`` members are read as byte ranges of the payload,
so a slice or a row gather moves only the bytes it returns.
"""

from __future__ import annotations

import ctypes
import io

import numpy as np

from mooncake._structured import _deps, hooks
from mooncake._structured.manifest import FIELD_SPECS_KEY, ManifestError
from mooncake._structured.transport import address_of
from mooncake._structured.model import (
    DirectCopyPayload, MultiBufferPayload, RawDestination, StructuredMemberSlice,
    TensorObjectBuffer, TensorPayload)


# -- encoding ----------------------------------------------------------------------------------

def normalize_metadata(metadata):
    if not hasattr(metadata, "keys") or not hasattr(metadata, "__getitem__"):
        raise TypeError("structured metadata must be a mapping")
    out = dict(metadata)
    if FIELD_SPECS_KEY in out:
        raise ValueError(f"structured metadata key {FIELD_SPECS_KEY!r} is reserved")
    if not isinstance(out.setdefault("layout", "structured"), str):
        raise ValueError("structured metadata layout must be a string")
    return out


def tensor_dtype_name(tensor):
    return str(tensor.dtype)


def torch_dtype(name):
    torch = _deps.require_torch()
    dtype = getattr(torch, str(name).removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ManifestError(f"unknown torch dtype: {name}")
    return dtype


def tensor_bytes(tensor):
    """A flat uint8 numpy view (or copy, for a non-CPU or non-contiguous tensor) of a tensor's
    bytes, in C order."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    torch = _deps.torch_module()
    if t.numel() == 0:
        return np.empty(0, dtype=np.uint8)
    return t.view(torch.uint8).numpy()


def encode_member(name, value):
    """(field spec, storable value) of one member."""
    if isinstance(value, TensorObjectBuffer):
        return {"encoding": "torch_tensor"}, value
    if isinstance(value, TensorPayload):
        value = value.tensor
    if _deps.is_tensor(value):
        if value.is_nested:
            return encode_jagged(name, value)
        if value.is_sparse:
            raise ValueError(f"structured member {name!r}: sparse tensors are not supported")
        return ({"encoding": "torch_tensor", "dtype": tensor_dtype_name(value),
                 "shape": list(value.shape), "element_size": int(value.element_size())},
                TensorPayload(value))
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"structured member {name!r}: object arrays have no byte layout "
                            "(store them as DataProto non_tensor_batch fields)")
        array = np.ascontiguousarray(value)
        return ({"encoding": "ndarray", "dtype": array.dtype.str, "shape": list(array.shape)},
                array.reshape(-1).view(np.uint8))
    if isinstance(value, (MultiBufferPayload, DirectCopyPayload)):
        if value.dtype is not None and value.shape is not None:
            return ({"encoding": "ndarray", "dtype": value.dtype, "shape": list(value.shape)},
                    value)
        return {"encoding": "bytes"}, value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"encoding": "bytes"}, value
    raise TypeError(f"structured member {name!r} has unsupported type {type(value).__name__}; "
                    "expected a numpy array, a torch tensor, bytes or a tensor_object_buffer")


def encode_jagged(name, value):
    """A jagged nested tensor as the reference stores it: its values, offsets (and lengths)
    tensors as store tensor objects one after another (``format: "tensor_parts"``, their
    sizes in ``part_bytes``), or ``torch.save`` bytes (``"torch_save"``) without the store's
    tensor codec or for a tensor off the CPU."""
    torch = _deps.torch_module()
    if value.layout != torch.jagged:
        raise ValueError(f"structured member {name!r}: nested tensors need torch.jagged layout")
    spec = {"encoding": "torch_tensor", "dtype": tensor_dtype_name(value), "nested": True,
            "format": "torch_save"}
    lengths = value.lengths()
    tensors = [value.values(), value.offsets(), *([] if lengths is None else [lengths])]
    if hooks.has_tensor_codec_helpers() and all(t.device.type == "cpu" for t in tensors):
        from mooncake.store import _serialize_tensor

        parts, owners = [], []
        for t in tensors:
            header, ptr, nbytes, owner = _serialize_tensor(t)
            data = bytes((ctypes.c_uint8 * nbytes).from_address(ptr)) if nbytes else b""
            parts.append(memoryview(header + data))
            owners.append(owner)
        spec.update(format="tensor_parts", part_bytes=[p.nbytes for p in parts],
                    has_lengths=lengths is not None,
                    ragged_idx=int(getattr(value, "_ragged_idx", 1)))
        return spec, MultiBufferPayload(tuple(parts), tuple(owners))
    buf = io.BytesIO()
    torch.save(value, buf)
    return spec, memoryview(buf.getvalue())


def encode_members(metadata, members):
    meta = normalize_metadata(metadata)
    specs, values = {}, {}
    for name, value in members.items():
        specs[name], values[name] = encode_member(name, value)
    if specs:
        meta[FIELD_SPECS_KEY] = specs
    return meta, values


# -- layouts -----------------------------------------------------------------------------------

class Layout:
    """The row layout of a dense member: dtype, shape, row width in bytes."""

    def __init__(self, name, spec):
        self.name = name
        self.encoding = spec.get("encoding", "bytes")
        dtype, shape = spec.get("dtype"), spec.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ManifestError(f"structured {self.encoding} field {name} is missing dtype or "
                                "shape")
        self.shape = tuple(shape)
        self.dtype_name = dtype
        if self.encoding == "ndarray":
            try:
                self.np_dtype = np.dtype(dtype)
            except TypeError as error:
                raise ManifestError(f"structured ndarray field {name} has bad dtype "
                                    f"{dtype!r}") from error
            self.itemsize = self.np_dtype.itemsize
        else:
            self.np_dtype = None
            self.itemsize = int(spec.get("element_size", 0))
            if self.itemsize <= 0:
                self.itemsize = torch_dtype(dtype).itemsize
        count = 1
        for d in self.shape[1:]:
            count *= d
        self.row_bytes = count * self.itemsize
        self.rows = self.shape[0] if self.shape else None
        self.nbytes = (self.rows if self.shape else 1) * self.row_bytes

    def output_shape(self, rows):
        return (rows, *self.shape[1:])

    def check(self, payload_spec):
        if payload_spec["bytes"] != self.nbytes:
            raise ManifestError(f"structured field {self.name} payload has "
                                f"{payload_spec['bytes']} bytes, its shape needs {self.nbytes}")


def row_runs(indices):
    """Consecutive runs (first row, count) of a row index list, in order."""
    runs = []
    for i in indices:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


def slice_indices(member_slice, total_rows):
    start, end, step = member_slice.bounds(total_rows)
    return range(start, end, step)


# -- destinations ------------------------------------------------------------------------------

def _raw_bytes(destination, nbytes):
    """The first nbytes of a raw destination as a ctypes array, or None when nbytes is 0 (an
    empty result needs no memory); a destination too small is a ValueError."""
    if destination.size < nbytes:
        raise ValueError(f"raw destination has {destination.size} bytes, expected at least "
                         f"{nbytes}")
    return (ctypes.c_uint8 * nbytes).from_address(destination.ptr) if nbytes else None


def _from_raw(lib, destination, dtype, shape, nbytes):
    """A raw destination's first nbytes as a ``lib`` (numpy or torch) array of dtype and shape."""
    buf = _raw_bytes(destination, nbytes)
    if buf is None:
        return lib.empty(shape, dtype=dtype)
    return lib.frombuffer(buf, dtype=dtype).reshape(shape)


def _check_dtype_shape(kind, name, destination, dtype, shape, spell):
    """A caller's destination must have the field's dtype (written as ``spell`` writes it) and
    shape."""
    if destination.dtype != dtype:
        raise ValueError(f"structured {kind} field {name} destination dtype mismatch: "
                         f"expected {spell(dtype)}, got {spell(destination.dtype)}")
    if tuple(destination.shape) != tuple(shape):
        raise ValueError(f"structured {kind} field {name} destination shape mismatch: "
                         f"expected {tuple(shape)}, got {tuple(destination.shape)}")


def ndarray_destination(name, destination, dtype, shape):
    if destination is None:
        return np.empty(shape, dtype=dtype)
    if isinstance(destination, RawDestination):
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return _from_raw(np, destination, dtype, shape, nbytes)
    if not isinstance(destination, np.ndarray):
        raise TypeError(f"structured ndarray field {name} destination must be a numpy.ndarray "
                        "or raw_destination")
    _check_dtype_shape("ndarray", name, destination, dtype, shape, lambda d: d.str)
    if not destination.flags["C_CONTIGUOUS"]:
        raise ValueError(f"structured ndarray field {name} destination must be C-contiguous")
    if not destination.flags["WRITEABLE"]:
        raise ValueError(f"structured ndarray field {name} destination must be writeable")
    return destination


def tensor_destination(name, destination, dtype, shape):
    torch = _deps.require_torch()
    if destination is None:
        return torch.empty(shape, dtype=dtype)
    if isinstance(destination, RawDestination):
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
        return _from_raw(torch, destination, dtype, shape, nbytes)
    if not isinstance(destination, torch.Tensor):
        raise TypeError(f"structured tensor field {name} destination must be a torch.Tensor, "
                        "a tensor_object_buffer or a raw_destination")
    _check_dtype_shape("tensor", name, destination, dtype, shape, str)
    if destination.device.type != "cpu" or not destination.is_contiguous():
        raise ValueError(f"structured tensor field {name} destination must be a contiguous "
                         "CPU tensor")
    return destination


# -- reading -----------------------------------------------------------------------------------

class PoolLease:
    """Owns one buffer-pool lease behind pool-backed results; released once, explicitly
    (``MooncakeBundleTransfer.release_result``) or when the last array using it is collected."""

    def __init__(self, lease):
        self.lease = lease
        self.released = False

    def release(self):
        if not self.released:
            self.released = True
            self.lease.release()

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - a destructor must not raise
            pass


class PoolArray(np.ndarray):
    """An ndarray over buffer-pool memory; it and every view of it keep the lease's owner
    (``_mooncake_pool_owner``) alive."""

    def __array_finalize__(self, obj):
        if obj is not None:
            self._mooncake_pool_owner = getattr(obj, "_mooncake_pool_owner", None)


def pool_array(pool, dtype, shape):
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    owner = PoolLease(pool.acquire(nbytes))
    try:
        buf = (ctypes.c_uint8 * nbytes).from_address(owner.lease.ptr)
        array = np.frombuffer(buf, dtype=dtype).reshape(shape).view(PoolArray)
    except BaseException:
        owner.release()
        raise
    array._mooncake_pool_owner = owner
    return array


def _patched_header(header, shape, data_bytes):
    """A tensor object's header for ``shape`` rows of its tensor: data size and the global
    and local shapes rewritten (the layout of the reference's header, which ours shares)."""
    out = bytearray(header)
    ctypes.c_uint64.from_buffer(out, 32).value = int(data_bytes)
    for i, d in enumerate(shape):
        ctypes.c_int64.from_buffer(out, 40 + 8 * i).value = int(d)
        ctypes.c_int64.from_buffer(out, 104 + 8 * i).value = int(d)
    return out


def _check_header(name, header, layout):
    """The stored header must describe the field spec's dtype and row shape (a header from
    another object, or a tampered one, is refused before any row is read)."""
    from mooncake.store import _tensor

    probe = _tensor._decode(_patched_header(header, (0, *layout.shape[1:]), 0))
    if probe is None or str(probe.dtype) != layout.dtype_name or \
            tuple(probe.shape[1:]) != tuple(layout.shape[1:]):
        raise ManifestError(f"tensor member {name}: its stored header does not match its "
                            f"field spec ({layout.dtype_name}, {list(layout.shape)})")


def _decode_tensor_object(buf, name):
    from mooncake.store import _tensor

    tensor = _tensor._decode(buf)
    if tensor is None:
        raise ManifestError(f"tensor member {name} does not hold a store tensor object")
    return tensor


def _torch_load(blob):
    torch = _deps.require_torch()
    return torch.load(io.BytesIO(blob), weights_only=True)


class MemberReader:
    """Reads members of one resolved bundle through the transport; with a buffer pool,
    ndarray and bytes members read without a destination land in pool leases (registered
    memory, so the store writes them without a staging copy), as the reference's."""

    def __init__(self, transport, pool=None):
        self.transport = transport
        self.pool = pool

    def _rows_into(self, payload_spec, layout, rows, address, base=0):
        """Rows ``rows`` (a list of row indices) packed one after another at ``address``;
        ``base``: the payload offset of row 0."""
        at, ranges = 0, []
        for first, count in row_runs(rows):
            n = count * layout.row_bytes
            ranges.append((base + first * layout.row_bytes, n, address + at))
            at += n
        self.transport.read_ranges(payload_spec, ranges)

    def _pool_read(self, payload_spec, dtype, shape, offset):
        """Bytes from ``offset`` into a new pool-backed array, in one ranged read; None when
        there is no pool or the store cannot read ranges."""
        if self.pool is None or not self.transport.can_read_ranges():
            return None
        array = pool_array(self.pool, dtype, shape)
        try:
            if array.nbytes:
                self.transport.read_ranges(
                    payload_spec, [(offset, array.nbytes, address_of(array.reshape(-1)))],
                    allow_get_into=False)
        except BaseException:
            array._mooncake_pool_owner.release()
            raise
        return array

    @staticmethod
    def _selection(name, layout, member_slice, rows):
        """The row list a slice or a gather selects (None: the whole member)."""
        if member_slice is None and rows is None:
            return None
        if not layout.shape:
            raise ValueError(f"structured member {name} is zero-dimensional and does not "
                             "support slicing")
        if rows is None:
            if member_slice.axis != 0:
                raise ValueError("structured slicing supports axis=0 only")
            return list(slice_indices(member_slice, layout.rows))
        rows = [int(r) for r in rows]
        if any(r < 0 or r >= layout.rows for r in rows):
            raise IndexError(f"row index out of range for {layout.rows} rows")
        return rows

    def read(self, name, payload_spec, field_spec, member_slice=None, rows=None,
             destination=None):
        """A member: whole, sliced (``member_slice``) or gathered (``rows``, a list)."""
        encoding = field_spec.get("encoding", "bytes")
        if encoding == "bytes":
            if member_slice is not None or rows is not None:
                raise ValueError(f"structured bytes member {name} does not support slicing")
            if destination is not None:
                raise ValueError(f"structured bytes member {name} does not support destinations")
            n = payload_spec["bytes"]
            pooled = self._pool_read(payload_spec, np.dtype(np.uint8), (n,), 0) if n else None
            return self.transport.read_bytes(payload_spec) if pooled is None else pooled
        if encoding == "torch_tensor":
            return self._read_tensor(name, payload_spec, field_spec, member_slice, rows,
                                     destination)
        if encoding != "ndarray":
            raise ManifestError(f"unsupported structured field encoding: {encoding}")
        layout = Layout(name, field_spec)
        layout.check(payload_spec)
        rows = self._selection(name, layout, member_slice, rows)
        shape = layout.shape if rows is None else layout.output_shape(len(rows))
        if rows is None and destination is None and layout.itemsize and all(shape):
            target = self._pool_read(payload_spec, layout.np_dtype, shape, 0)
            if target is not None:
                return target
        if destination is None and self.pool is not None and layout.itemsize and all(shape) \
                and self.transport.can_read_ranges():
            target = pool_array(self.pool, layout.np_dtype, shape)
        else:
            target = ndarray_destination(name, destination, layout.np_dtype, shape)
        address = address_of(target.reshape(-1).view(np.uint8)) if target.size else 0
        if not address:
            return target
        if rows is None:
            self.transport.read_into(payload_spec, address, 0, layout.nbytes)
        else:
            self._rows_into(payload_spec, layout, rows, address)
        return target

    # tensors

    def _read_tensor(self, name, payload_spec, field_spec, member_slice, rows, destination):
        if field_spec.get("nested"):
            if destination is not None:
                raise ValueError(f"structured nested tensor member {name} does not support "
                                 "destinations")
            return self._read_nested(name, payload_spec, field_spec, member_slice, rows)
        if payload_spec.get("format") == "torch_save":
            if destination is not None:
                raise ValueError(f"structured torch_save tensor member {name} does not "
                                 "support destinations")
            value = _torch_load(self.transport.read_bytes(payload_spec))
            if rows is not None:
                return value[list(rows)]
            if member_slice is not None:
                if member_slice.axis != 0:
                    raise ValueError("structured tensor slicing supports axis=0 only")
                return value[list(slice_indices(member_slice, len(value)))]
            return value
        if field_spec.get("format") == "raw":  # our earlier layout: the data bytes alone
            return self._read_dense_tensor(name, payload_spec, field_spec, member_slice, rows,
                                           destination, 0)
        header = payload_spec.get("metadata_bytes")
        if header is None or field_spec.get("format") == "tensor_object" or \
                not isinstance(field_spec.get("shape"), list):
            return self._read_tensor_object(name, payload_spec, member_slice, rows, destination)
        if not isinstance(header, int) or isinstance(header, bool) or header < 0:
            raise ManifestError(f"structured tensor field {name} has bad metadata_bytes")
        whole = member_slice is None and rows is None
        if whole and isinstance(destination, (TensorObjectBuffer, RawDestination)):
            return self._read_tensor_object(name, payload_spec, None, None, destination)
        if whole and destination is None:
            if payload_spec.get("kind") == "tensor":
                return self.transport.get_tensor(payload_spec["key"])
            return _decode_tensor_object(bytearray(self.transport.read_bytes(payload_spec)),
                                         name)
        if isinstance(destination, (TensorObjectBuffer, RawDestination)) or destination is None:
            return self._read_tensor_rows(name, payload_spec, field_spec, member_slice, rows,
                                          destination, header)
        return self._read_dense_tensor(name, payload_spec, field_spec, member_slice, rows,
                                       destination, header)

    def _read_dense_tensor(self, name, payload_spec, field_spec, member_slice, rows,
                           destination, offset):
        """Rows of a tensor whose data starts at ``offset`` into a tensor (new, the caller's,
        or over raw memory)."""
        layout = Layout(name, field_spec)
        if payload_spec["bytes"] != offset + layout.nbytes:
            raise ManifestError(f"structured field {name} payload has {payload_spec['bytes']} "
                                f"bytes, its shape needs {offset + layout.nbytes}")
        rows = self._selection(name, layout, member_slice, rows)
        shape = layout.shape if rows is None else layout.output_shape(len(rows))
        if isinstance(destination, TensorObjectBuffer):  # raw memory of the caller's
            destination = RawDestination(destination.ptr, destination.size, destination.owner)
        target = tensor_destination(name, destination, torch_dtype(layout.dtype_name), shape)
        address = int(target.data_ptr()) if target.numel() else 0
        if not address:
            return target
        if rows is None:
            self.transport.read_into(payload_spec, address, offset, layout.nbytes)
        else:
            self._rows_into(payload_spec, layout, rows, address, offset)
        return target

    def _read_tensor_rows(self, name, payload_spec, field_spec, member_slice, rows,
                          destination, header):
        """Rows of a stored tensor object: its header (read, then rewritten for the rows)
        and the rows' byte ranges, as one tensor object; into a tensor-object or raw
        destination (returned) or new memory (the tensor over it returned)."""
        layout = Layout(name, field_spec)
        if payload_spec["bytes"] != header + layout.nbytes:
            raise ManifestError(f"structured field {name} payload has {payload_spec['bytes']} "
                                f"bytes, its shape needs {header + layout.nbytes}")
        rows = self._selection(name, layout, member_slice, rows)
        data_bytes = len(rows) * layout.row_bytes
        stored = bytearray(header)
        if header:
            self.transport.read_into(payload_spec, address_of(memoryview(stored)), 0, header)
        _check_header(name, stored, layout)
        head = _patched_header(stored, layout.output_shape(len(rows)), data_bytes)
        if destination is None:
            buf = bytearray(header + data_bytes)
            base = address_of(memoryview(buf))
        else:
            if destination.size < header + data_bytes:
                raise ValueError(f"tensor destination has {destination.size} bytes, expected "
                                 f"at least {header + data_bytes}")
            buf, base = None, destination.ptr
        ctypes.memmove(base, bytes(head), header)
        if data_bytes:
            self._rows_into(payload_spec, layout, rows, base + header, header)
        if destination is not None:
            return destination
        return _decode_tensor_object(buf, name)

    def _read_tensor_object(self, name, payload_spec, member_slice, rows, destination):
        """A payload that is one whole tensor object with no row layout in its field spec
        (a tensor_object_buffer member): read whole, then rows taken from the tensor."""
        size = payload_spec["bytes"]
        if isinstance(destination, (TensorObjectBuffer, RawDestination)):
            if member_slice is not None or rows is not None:
                raise ValueError(f"tensor-object member {name} does not support destinations "
                                 "with row selection")
            if payload_spec.get("kind") == "tensor":
                got = self.transport.get_tensor_into(payload_spec["key"], destination.ptr,
                                                     destination.size)
                return destination if got is None else got
            if destination.size < size:
                raise ValueError(f"tensor destination has {destination.size} bytes, expected "
                                 f"at least {size}")
            self.transport.read_ranges(payload_spec, [(0, size, destination.ptr)],
                                       allow_get_into=False)
            return destination
        if destination is not None:
            raise ValueError(f"structured tensor member {name} only supports "
                             "tensor_object_buffer or raw_destination destinations")
        tensor = _decode_tensor_object(bytearray(self.transport.read_bytes(payload_spec)), name)
        if rows is not None:
            return tensor[list(rows)]
        if member_slice is not None:
            return tensor[list(slice_indices(member_slice, tensor.shape[0]))]
        return tensor

    def _read_nested(self, name, payload_spec, field_spec, member_slice, rows):
        torch = _deps.require_torch()
        fmt = field_spec.get("format", "torch_save")
        if fmt == "jagged_rows":  # our earlier layout: rows one after another
            return self._read_jagged(name, payload_spec, field_spec, member_slice, rows)
        blob = self.transport.read_bytes(payload_spec)
        if fmt == "torch_save":
            value = _torch_load(blob)
        elif fmt == "tensor_parts":
            value = self._nested_from_parts(name, blob, field_spec)
        else:
            raise ManifestError(f"unsupported nested tensor payload format: {fmt}")
        if rows is None and member_slice is None:
            return value
        total = value.size(0)
        if rows is None:
            if member_slice.axis != 0:
                raise ValueError("structured nested tensor slicing supports axis=0 only")
            rows = slice_indices(member_slice, total)
        rows = [int(r) for r in rows]
        if any(r < -total or r >= total for r in rows):
            raise IndexError(f"row index out of range for {total} rows")
        picked = [value[r] for r in rows]
        if picked:
            out = torch.nested.as_nested_tensor(picked, layout=torch.jagged)
        else:
            out = self._empty_nested(value, torch)
        ragged = getattr(value, "_ragged_idx", 1)
        if hasattr(out, "_ragged_idx"):
            out._ragged_idx = ragged
        return out

    @staticmethod
    def _empty_nested(value, torch):
        """No rows of ``value``: its values with the ragged dimension empty."""
        ragged = getattr(value, "_ragged_idx", 1)
        shape = list(value.values().shape)
        shape[ragged - 1] = 0
        return torch.nested.nested_tensor_from_jagged(
            torch.empty(shape, dtype=value.dtype), offsets=torch.zeros(1, dtype=torch.int64),
            jagged_dim=ragged)

    @staticmethod
    def _nested_from_parts(name, blob, field_spec):
        torch = _deps.require_torch()
        sizes = field_spec.get("part_bytes")
        want = 3 if field_spec.get("has_lengths") else 2
        if not isinstance(sizes, list) or len(sizes) != want or any(
                not isinstance(n, int) or isinstance(n, bool) or n <= 0 for n in sizes) \
                or sum(sizes) != len(blob):
            raise ManifestError(f"nested tensor member {name} has invalid part metadata")
        parts, at = [], 0
        for n in sizes:
            parts.append(_decode_tensor_object(bytearray(blob[at:at + n]), name))
            at += n
        return torch.nested.nested_tensor_from_jagged(
            parts[0], offsets=parts[1], lengths=parts[2] if want == 3 else None,
            jagged_dim=int(field_spec.get("ragged_idx", 1)))

    def _read_jagged(self, name, payload_spec, field_spec, member_slice, rows):
        torch = _deps.require_torch()
        offsets, shapes = field_spec.get("row_offsets"), field_spec.get("row_shapes")
        if (not isinstance(offsets, list) or not isinstance(shapes, list)
                or len(offsets) != len(shapes) + 1 or offsets[-1] != payload_spec["bytes"]
                or any(b < a for a, b in zip(offsets, offsets[1:]))):
            raise ManifestError(f"nested tensor member {name} has invalid row offsets")
        total = len(shapes)
        if rows is None:
            rows = range(total) if member_slice is None else slice_indices(member_slice, total)
        rows = [int(r) for r in rows]
        if any(r < 0 or r >= total for r in rows):
            raise IndexError(f"row index out of range for {total} rows")
        dtype = torch_dtype(field_spec.get("dtype"))
        sizes = [offsets[r + 1] - offsets[r] for r in rows]
        buf = np.empty(sum(sizes), dtype=np.uint8)
        base, at, ranges = int(buf.ctypes.data), 0, []
        for r, n in zip(rows, sizes):
            ranges.append((offsets[r], n, base + at))
            at += n
        self.transport.read_ranges(payload_spec, ranges)
        out, at = [], 0
        for r, n in zip(rows, sizes):
            shape = tuple(shapes[r])
            part = torch.frombuffer(bytearray(buf[at:at + n]), dtype=dtype) if n else \
                torch.empty(0, dtype=dtype)
            out.append(part.reshape(shape))
            at += n
        ragged = int(field_spec.get("ragged_idx", 1))
        if out:
            result = torch.nested.as_nested_tensor(out, layout=torch.jagged)
            if hasattr(result, "_ragged_idx"):
                result._ragged_idx = ragged
            return result
        shape = list(shapes[0]) if shapes else [0]  # no rows: values empty along the ragged dim
        if 1 <= ragged <= len(shape):
            shape[ragged - 1] = 0
        return torch.nested.nested_tensor_from_jagged(
            torch.empty(shape, dtype=dtype), offsets=torch.zeros(1, dtype=torch.int64),
            jagged_dim=ragged)


__all__ = ["Layout", "MemberReader", "StructuredMemberSlice", "encode_member", "encode_members",
           "normalize_metadata"]
