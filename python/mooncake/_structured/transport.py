"""Every call this package makes on the store, with the fallbacks a smaller store needs.

Writes (``puts``): ``put`` per chunk, or staged through buffer-pool leases and written with
``batch_put_from`` when a pool is there, ``put_tensor`` / ``pub_tensor`` for tensors,
``put_tensor_from`` / ``put_from`` for tensor-object buffers. Reads: below. Every short or failed
call raises; a payload whose object is gone raises ``PayloadMissingError`` (a ``KeyError``).
"""

from __future__ import annotations

import ctypes

import numpy as np

from mooncake._structured.calls import (  # noqa: F401 - re-exported for the other modules
    OBJECT_NOT_FOUND, PayloadMissingError, _method, _status_ok, address_of, check_status,
    config_for_keys, config_with_group, copy_config, single_group_id)
from mooncake._structured.puts import PutPath


# -- the transport -----------------------------------------------------------------------------

class Transport(PutPath):
    """Every store call of this package. Writes: see ``puts.PutPath``. Reads: whole payloads
    with ``batch_get_into`` (else ``get`` per chunk); ranges of a payload into memory with
    ``get_into`` (one whole chunk) or one ``get_into_ranges`` call (else ``get`` per chunk).
    As the reference, the fast read calls are used only on a store that can also register
    memory (``register_buffer``/``unregister_buffer``): one that cannot is treated as a plain
    ``get`` store. Ours does not register per read (our store moves unregistered memory)."""

    def __init__(self, store, buffer_pool=None):
        PutPath.__init__(self, store, buffer_pool)

    def _fast(self, name):
        if _method(self.store, "register_buffer") is None or \
                _method(self.store, "unregister_buffer") is None:
            return None
        return _method(self.store, name)

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

    def read_bytes(self, spec):
        """A whole payload as bytes: its chunks in one ``batch_get_into``."""
        length = spec["bytes"]
        out = bytearray(length)
        if not length:
            return bytes(out)
        base = address_of(memoryview(out))
        chunks = [c for c in spec["chunks"] if c["bytes"]]
        batch_get_into = self._fast("batch_get_into")
        if batch_get_into is not None:
            at, addrs = 0, []
            for c in chunks:
                addrs.append(base + at)
                at += c["bytes"]
            got = list(batch_get_into([c["key"] for c in chunks], addrs,
                                      [c["bytes"] for c in chunks]))
            if len(got) != len(chunks):
                raise RuntimeError(f"batch_get_into returned {len(got)} results for "
                                   f"{len(chunks)} keys")
            for c, a, n in zip(chunks, addrs, got):
                self._check_read((c["key"], c["bytes"], 0, a, c["bytes"]), n, "batch_get_into")
            return bytes(out)
        at = 0
        for c in chunks:
            data = self._whole_chunk(c["key"], c["bytes"], None)
            ctypes.memmove(base + at, int(data.ctypes.data), c["bytes"])
            at += c["bytes"]
        return bytes(out)

    def read_into(self, spec, address, offset, length):
        """Bytes ``offset:offset+length`` of payload ``spec`` into memory at ``address``."""
        self.read_ranges(spec, [(offset, length, address)])

    @staticmethod
    def _fragments(spec, ranges):
        """(chunk key, chunk bytes, offset in chunk, destination address, size) pieces."""
        frags = []
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
        return frags

    def read_ranges(self, spec, ranges, allow_get_into=True):
        """Several ``(offset, length, address)`` ranges of payload ``spec``: one whole chunk
        with ``get_into`` (unless ``allow_get_into`` is false), anything else in one
        ``get_into_ranges`` call; without them each chunk touched is read once by ``get``."""
        frags = self._fragments(spec, ranges)
        if not frags:
            return
        get_into = self._fast("get_into")
        if (allow_get_into and get_into is not None and len(frags) == 1
                and frags[0][2] == 0 and frags[0][4] == frags[0][1]):
            frag = frags[0]
            self._check_read(frag, get_into(frag[0], frag[3], frag[4]), "get_into")
            return
        if self.read_ranges_fast(frags):
            return
        cache = {}
        for key, chunk_bytes, src, dst, size in frags:
            if key not in cache:
                cache[key] = self._whole_chunk(key, chunk_bytes, None)
            ctypes.memmove(dst, int(cache[key].ctypes.data) + src, size)

    def can_read_ranges(self):
        return self._fast("get_into_ranges") is not None

    def read_ranges_fast(self, frags):
        """The pieces in one ``get_into_ranges`` call; False when the store has none."""
        ranges_fn = self._fast("get_into_ranges")
        if ranges_fn is None:
            return False
        base = min(f[3] for f in frags)
        got = ranges_fn([base], [[f[0] for f in frags]], [[[f[3] - base] for f in frags]],
                        [[[f[2]] for f in frags]], [[[f[4]] for f in frags]])
        got = list(got)
        if len(got) != 1 or len(got[0]) != len(frags):
            raise RuntimeError(f"get_into_ranges returned an invalid result shape for "
                               f"{len(frags)} ranges")
        for frag, res in zip(frags, got[0]):
            self._check_read(frag, res[0] if res else -1, "get_into_ranges")
        return True

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

    # store tensor objects (``kind: "tensor"`` payloads)

    def get_tensor(self, key):
        get_tensor = _method(self.store, "get_tensor")
        if get_tensor is None:
            raise RuntimeError("structured tensor payload does not support get_tensor")
        tensor = get_tensor(key)
        if tensor is None:
            raise PayloadMissingError(f"tensor payload {key!r} is not in the store")
        return tensor

    def get_tensor_into(self, key, ptr, size):
        get_tensor_into = _method(self.store, "get_tensor_into")
        if get_tensor_into is None:
            raise RuntimeError("structured tensor payload does not support get_tensor_into")
        return get_tensor_into(key, ptr, size)

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
