"""Every call this package makes on the store, with the fallbacks a smaller store needs.

Writes: ``batch_put_from`` from the caller's memory (or from one staging copy when a chunk is
several buffers), ``put`` of a bytes copy when the policy says ``copy`` or the store has no
``batch_put_from``, ``put_tensor_from`` / ``put_from`` for tensor-object buffers. Reads:
``get_into_ranges`` (one master round trip for all ranges) when the store has it, else
``get_into`` of whole chunks, else ``get``. Every short or failed call raises; a payload whose
object is gone raises ``PayloadMissingError`` (a ``KeyError``).
"""

from __future__ import annotations

import copy
import ctypes
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np

from mooncake._structured.model import AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS

OBJECT_NOT_FOUND = -704
_CONFIG_FIELDS = ("replica_num", "with_soft_pin", "with_hard_pin", "preferred_segment",
                  "preferred_segments", "group_ids", "soft_pin_action", "soft_pin_ttl_ms")


class PayloadMissingError(KeyError):
    """A payload object of a bundle is not in the store (removed, evicted or never written)."""

    def __str__(self):
        return str(self.args[0]) if self.args else "payload missing"


def _method(store, name):
    fn = getattr(store, name, None)
    return fn if callable(fn) else None


def address_of(view):
    """The address of a contiguous buffer (read-only ones too)."""
    arr = np.frombuffer(view, dtype=np.uint8) if not isinstance(view, np.ndarray) else view
    return int(arr.ctypes.data) if arr.size else 0


def _status_ok(status):
    return status is None or status == 0


def check_status(status, operation, key):
    if not _status_ok(status):
        raise RuntimeError(f"{operation} failed for {key}: {status}")


# -- write configs -----------------------------------------------------------------------------

def copy_config(config):
    try:
        return copy.copy(config)
    except TypeError:
        pass
    try:
        fresh = type(config)()
    except Exception as error:
        raise TypeError("structured object store config must be copyable or "
                        "default-constructible") from error
    for name in _CONFIG_FIELDS:
        if hasattr(config, name):
            value = getattr(config, name)
            setattr(fresh, name, list(value) if isinstance(value, (list, tuple)) else value)
    return fresh


def single_group_id(config):
    """The one logical group id of ``config.group_ids`` (None: none given; "": ungrouped)."""
    raw = getattr(config, "group_ids", None) if config is not None else None
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    try:
        ids = list(raw)
    except TypeError as error:
        raise ValueError("structured object store config.group_ids must contain strings") \
            from error
    if len(ids) > 1:
        raise ValueError("structured object store config.group_ids must contain exactly one "
                         "logical group id; it is expanded across internal Mooncake keys")
    if not ids:
        return None
    if not isinstance(ids[0], str):
        raise ValueError("structured object store config.group_ids must contain strings")
    return ids[0]


def config_for_keys(config, count):
    """``config`` with its one group id repeated for each of ``count`` keys."""
    if config is None or count <= 0:
        return config
    raw = getattr(config, "group_ids", None)
    if raw is None:
        return config
    gid = single_group_id(config)
    if gid is not None and count == 1 and not isinstance(raw, str):
        return config
    out = copy_config(config)
    out.group_ids = None if gid is None else [gid] * count
    return out


def config_with_group(config, group_id):
    current = single_group_id(config)
    if current and current != group_id:
        raise ValueError("config.group_ids conflicts with the DataProto storage group")
    if config is None:
        try:
            from mooncake.store import ReplicateConfig

            out = ReplicateConfig()
        except Exception:  # the store extension is not importable: a duck-typed config
            out = SimpleNamespace()
    else:
        out = copy_config(config)
    out.group_ids = [group_id]
    return out


def _call_write(fn, *args, config=None):
    return fn(*args) if config is None else fn(*args, config=config)


# -- the transport -----------------------------------------------------------------------------

class Transport:
    def __init__(self, store, buffer_pool=None):
        self.store = store
        self.buffer_pool = buffer_pool

    # writes

    def write_chunks(self, keys, parts, policy, config=None):
        """Write chunk ``keys[i]`` from the memoryviews ``parts[i]`` (their concatenation).
        Raises on the first failure; the caller removes ``keys`` then."""
        if not keys:
            return
        batch_put_from = _method(self.store, "batch_put_from")
        if policy.copy_mode == "zero_copy" and batch_put_from is None:
            raise RuntimeError("zero-copy put requires store.batch_put_from")
        if policy.copy_mode == "copy" or batch_put_from is None:
            for key, group in zip(keys, parts):
                value = group[0] if len(group) == 1 else b"".join(bytes(p) for p in group)
                status = _call_write(self.store.put, key, value,
                                     config=config_for_keys(config, 1))
                check_status(status, "put", key)
            return
        if policy.copy_mode == "zero_copy" and any(len(g) != 1 for g in parts):
            raise RuntimeError("zero-copy put requires one contiguous buffer per chunk")
        total = sum(p.nbytes for g in parts for p in g)
        groups = self._groups(len(keys), total, policy)
        if len(groups) == 1:
            self._batch_put(batch_put_from, keys, parts, config)
            return
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            futures = [pool.submit(self._batch_put, batch_put_from, keys[a:b], parts[a:b], config)
                       for a, b in groups]
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    @staticmethod
    def _groups(count, total, policy):
        inflight = policy.max_inflight_put
        parallel = inflight > 1 and policy.put_mode != "batch" and (
            policy.put_mode == "parallel"
            or (count >= AUTO_PARALLEL_MIN_CHUNKS and total >= AUTO_PARALLEL_MIN_BYTES))
        if not parallel or count == 1:
            return [(0, count)]
        n = min(inflight, count)
        size = -(-count // n)
        return [(a, min(a + size, count)) for a in range(0, count, size)]

    def _batch_put(self, batch_put_from, keys, parts, config):
        ptrs, sizes, keep = [], [], []
        for group in parts:
            if len(group) == 1:
                view = group[0]
            else:
                view = memoryview(np.concatenate([np.frombuffer(p, dtype=np.uint8)
                                                  for p in group]))
                keep.append(view)
            ptrs.append(address_of(view))
            sizes.append(view.nbytes)
        results = _call_write(batch_put_from, list(keys), ptrs, sizes,
                              config=config_for_keys(config, len(keys)))
        results = list(results)
        if len(results) != len(keys):
            raise RuntimeError(
                f"batch_put_from returned {len(results)} results for {len(keys)} keys")
        for key, status in zip(keys, results):
            check_status(status, "batch_put_from", key)

    def write_tensor_object(self, key, ptr, size, config=None):
        """A whole tensor object at ``ptr`` written without a copy where the store can."""
        put_tensor_from = _method(self.store, "put_tensor_from")
        put_from = _method(self.store, "put_from")
        if put_tensor_from is not None and config is None:
            status, op = put_tensor_from(key, ptr, size), "put_tensor_from"
        elif put_from is not None:
            status, op = _call_write(put_from, key, ptr, size,
                                     config=config_for_keys(config, 1)), "put_from"
        else:
            status, op = _call_write(self.store.put, key, ctypes.string_at(ptr, size),
                                     config=config_for_keys(config, 1)), "put"
        check_status(status, op, key)

    def put_blob(self, key, blob, config=None):
        status = _call_write(self.store.put, key, blob, config=config_for_keys(config, 1))
        check_status(status, "put", key)

    # reads

    def get_blob(self, key, what):
        """A whole small object (a manifest) by ``get``."""
        try:
            blob = self.store.get(key)
        except KeyError:
            blob = None
        if blob is None or (isinstance(blob, int)) or len(blob) == 0:
            raise PayloadMissingError(f"{what} {key!r} is not in the store")
        return bytes(blob)

    def read_into(self, spec, address, offset, length):
        """Bytes ``offset:offset+length`` of payload ``spec`` into memory at ``address``."""
        self.read_ranges(spec, [(offset, length, address)])

    def read_ranges(self, spec, ranges, single=False):
        """Several ``(offset, length, address)`` ranges of payload ``spec``: whole chunks in one
        ``batch_get_into`` (``get_into`` for one chunk when ``single``: small control reads),
        parts of chunks in one ``get_into_ranges``; each falls back to smaller calls."""
        frags = []  # (chunk key, chunk bytes, offset in chunk, destination address, size)
        for offset, length, address in ranges:
            if length == 0:
                continue
            end = offset + length
            if offset < 0 or length < 0 or end > spec["bytes"]:
                raise ValueError(f"range {offset}:{end} is outside payload {spec['key']!r} "
                                 f"of {spec['bytes']} bytes")
            at = 0
            for chunk in spec["chunks"]:
                lo, hi = at, at + chunk["bytes"]
                a, b = max(lo, offset), min(hi, end)
                if a < b:
                    frags.append((chunk["key"], chunk["bytes"], a - lo, address + a - offset,
                                  b - a))
                at = hi
                if at >= end:
                    break
        if not frags:
            return
        whole = [f for f in frags if f[2] == 0 and f[4] == f[1]]
        partial = [f for f in frags if not (f[2] == 0 and f[4] == f[1])]
        get_into = _method(self.store, "get_into")
        batch_get_into = _method(self.store, "batch_get_into")
        if whole and batch_get_into is not None and not (single and len(whole) == 1):
            got = list(batch_get_into([f[0] for f in whole], [f[3] for f in whole],
                                      [f[4] for f in whole]))
            if len(got) != len(whole):
                raise RuntimeError(f"batch_get_into returned {len(got)} results for "
                                   f"{len(whole)} keys")
            for frag, n in zip(whole, got):
                self._check_read(frag, n, "batch_get_into")
            whole = []
        for frag in whole:
            if get_into is not None:
                self._check_read(frag, get_into(frag[0], frag[3], frag[4]), "get_into")
            else:
                data = self._whole_chunk(frag[0], frag[1], None)
                ctypes.memmove(frag[3], int(data.ctypes.data), frag[4])
        if not partial:
            return
        ranges_fn = _method(self.store, "get_into_ranges")
        if ranges_fn is not None:
            base = min(f[3] for f in partial)
            got = ranges_fn([base], [[f[0] for f in partial]],
                            [[[f[3] - base] for f in partial]], [[[f[2]] for f in partial]],
                            [[[f[4]] for f in partial]])
            for frag, res in zip(partial, got[0]):
                self._check_read(frag, res[0] if res else -1, "get_into_ranges")
            return
        cache = {}
        for key, chunk_bytes, src, dst, size in partial:
            if key not in cache:
                cache[key] = self._whole_chunk(key, chunk_bytes, get_into)
            ctypes.memmove(dst, int(cache[key].ctypes.data) + src, size)

    @staticmethod
    def _check_read(frag, n, op):
        if n == OBJECT_NOT_FOUND:
            raise PayloadMissingError(f"payload chunk {frag[0]!r} is not in the store")
        if n != frag[4]:
            raise RuntimeError(f"{op} failed for {frag[0]}: {n}")

    def _whole_chunk(self, key, chunk_bytes, get_into):
        if get_into is not None:
            tmp = np.empty(chunk_bytes, dtype=np.uint8)
            n = get_into(key, int(tmp.ctypes.data), chunk_bytes)
            if n == OBJECT_NOT_FOUND:
                raise PayloadMissingError(f"payload chunk {key!r} is not in the store")
            if n != chunk_bytes:
                raise RuntimeError(f"get_into failed for {key}: {n}")
            return tmp
        data = self.get_blob(key, "payload chunk")
        if len(data) != chunk_bytes:
            raise RuntimeError(f"payload chunk {key!r} has {len(data)} bytes, expected "
                               f"{chunk_bytes}")
        return np.frombuffer(data, dtype=np.uint8)

    def read_bytes(self, spec, offset=0, length=None, single=False):
        length = spec["bytes"] - offset if length is None else length
        out = bytearray(length)
        if length:
            self.read_ranges(spec, [(offset, length, address_of(memoryview(out)))], single)
        return bytes(out)

    # removal

    def remove_keys(self, keys, strict):
        """Remove ``keys`` (force): missing ones are fine. ``strict``: raise when any stays."""
        pending = list(dict.fromkeys(keys))
        if not pending:
            return
        batch_remove = _method(self.store, "batch_remove")
        if batch_remove is not None:
            try:
                results = list(batch_remove(pending, True))
                if len(results) != len(pending):
                    raise RuntimeError(f"batch_remove returned {len(results)} results for "
                                       f"{len(pending)} keys")
                pending = [k for k, s in zip(pending, results)
                           if not (_status_ok(s) or s == OBJECT_NOT_FOUND)]
            except Exception:
                if strict:
                    raise
        failed = []
        for key in pending:
            try:
                status = self.store.remove(key, True)
            except KeyError:
                continue
            except Exception:
                if strict:
                    raise
                continue
            if not (_status_ok(status) or status == OBJECT_NOT_FOUND):
                failed.append((key, status))
        if failed and strict:
            raise RuntimeError(f"failed to remove {len(failed)} Mooncake keys: {failed[:3]}")
