"""The write path: how a payload's chunks, a tensor and a tensor-object buffer reach the store.

Shaped as the reference's, so a store (or a test's fake) sees the same calls:

- ``copy_mode="copy"``, or a store without ``batch_put_from``: one ``put`` per chunk (a chunk
  made of several buffers joined first), in parallel groups when the policy says so.
- No buffer pool (ours): a one-key ``batch_put_from`` per chunk from the caller's memory,
  in parallel groups when the policy says so (the reference puts a bytes copy per chunk).
- With a buffer pool (given, or made for a store that offers ``_get_pyclient_capsule``): each
  chunk is copied into a lease of registered memory and written with a one-key
  ``batch_put_from``, the lease released right after (streamed: one lease at a time per
  worker). ``DirectCopyPayload`` arrays are gathered into the lease by the native
  ``concat_arrays_into`` (one copy, no intermediate join).
- ``copy_mode="zero_copy"``: ``batch_put_from`` straight from the caller's memory, one
  contiguous buffer per chunk (ours: the reference refuses every non-tensor-object payload).
- Tensors: ``put_tensor`` (``pub_tensor`` with a config) as one store tensor object.
- Every call's config names the one logical group id once per key it writes.

A failure removes the chunks of that payload already written and is raised.
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor

from mooncake._structured import hooks
from mooncake._structured.calls import (
    _call_write, _method, address_of, check_status, config_for_keys)
from mooncake._structured.model import AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS


def _nbytes(buffer):
    """Bytes of one buffer of a chunk (anything with a length counts, as the reference)."""
    nbytes = getattr(buffer, "nbytes", None)
    return int(nbytes) if nbytes is not None else len(buffer)


def _check_results(results, keys, operation):
    results = list(results)
    if len(results) != len(keys):
        raise RuntimeError(f"{operation} returned {len(results)} results for {len(keys)} "
                           "chunks")
    for key, status in zip(keys, results):
        check_status(status, operation, key)


def _ranges(count, workers):
    """``workers`` (at most) consecutive index ranges covering ``count`` items."""
    workers = max(1, min(workers, count))
    size = -(-count // workers)
    return [(a, min(a + size, count)) for a in range(0, count, size)]


def _run_parallel(jobs):
    """Run the callables on threads; the first error is raised once all have ended."""
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error


class PutPath:
    def __init__(self, store, buffer_pool=None):
        self.store = store
        self.buffer_pool = buffer_pool

    # the buffer pool

    def _store_offers_pool(self):
        get_capsule = _method(self.store, "_get_pyclient_capsule")
        if get_capsule is None:
            return False
        try:
            return get_capsule() is not None
        except Exception:  # noqa: BLE001 - a store that cannot say has no pool
            return False

    def ensure_buffer_pool(self):
        """The pool writes are staged through: the caller's, or one made for a store that
        offers it (as the reference); None when there is none."""
        if self.buffer_pool is None and self._store_offers_pool():
            try:
                from mooncake.buffer_pool import BufferPool

                self.buffer_pool = BufferPool(self.store)
            except (ImportError, AttributeError, RuntimeError, TypeError):
                return None
        return self.buffer_pool

    # chunks

    def resolve_put_mode(self, groups, policy):
        """"parallel" or "batch" for the chunk groups (lists of buffers) of one payload."""
        if policy.put_mode in ("parallel", "batch"):
            return policy.put_mode
        if policy.max_inflight_put <= 1 or len(groups) < AUTO_PARALLEL_MIN_CHUNKS:
            return "batch"
        if sum(_nbytes(b) for g in groups for b in g) < AUTO_PARALLEL_MIN_BYTES:
            return "batch"
        return "parallel" if min(policy.max_inflight_put, len(groups)) >= 2 else "batch"

    _resolve_buffer_group_put_mode = resolve_put_mode  # the reference's name

    def write_chunks(self, keys, groups, policy, config=None):
        """Write chunk ``keys[i]`` as the concatenation of the buffers ``groups[i]``."""
        if not keys:
            return
        try:
            if policy.copy_mode == "zero_copy":
                self._put_zero_copy(keys, groups, config)
            elif policy.copy_mode == "copy" or (self.ensure_buffer_pool() is None and
                                                _method(self.store, "batch_put_from") is None):
                self._each_group(keys, groups, policy, self._put_each, config,
                                 parallel=policy.copy_mode != "copy")
            elif self.buffer_pool is None:
                self._each_group(keys, groups, policy, self._put_from_caller, config,
                                 parallel=True)
            elif all(len(g) == 1 for g in groups):
                self._stream(keys, groups, config)
            elif _method(self.store, "batch_put_from") is None:
                self._put_each(keys, groups, config)
            else:
                self._each_group(keys, groups, policy, self._stream, config, parallel=True)
        except BaseException:
            self.remove_keys(keys, strict=False)
            raise

    def _each_group(self, keys, groups, policy, writer, config, parallel):
        if not parallel or self.resolve_put_mode(groups, policy) == "batch":
            writer(keys, groups, config)
            return
        _run_parallel([lambda a=a, b=b: writer(keys[a:b], groups[a:b], config)
                       for a, b in _ranges(len(keys), policy.max_inflight_put)])

    def _put_each(self, keys, groups, config):
        for key, group in zip(keys, groups):
            value = group[0] if len(group) == 1 else b"".join(bytes(p) for p in group)
            check_status(_call_write(self.store.put, key, value,
                                     config=config_for_keys(config, 1)), "put", key)

    def _put_from_caller(self, keys, groups, config):
        """Ours, without a pool: each chunk a one-key batch_put_from straight from the
        caller's memory (a chunk of several buffers joined first). The reference puts a bytes
        copy per chunk here; our store reads unregistered memory itself, so no copy is
        needed."""
        for key, group in zip(keys, groups):
            if len(group) == 1:
                view = group[0]
            else:
                view = memoryview(b"".join(bytes(p) for p in group))
            self._batch_put_one(key, address_of(view), _nbytes(view), config)

    def _batch_put_one(self, key, ptr, size, config):
        batch_put_from = _method(self.store, "batch_put_from")
        if batch_put_from is None:
            raise RuntimeError("batch_put_from is unavailable")
        _check_results(_call_write(batch_put_from, [key], [ptr], [size],
                                   config=config_for_keys(config, 1)), [key], "batch_put_from")

    def _stream(self, keys, groups, config):
        """Each chunk: a lease, its buffers copied in, a one-key batch_put_from, release."""
        pool = self.buffer_pool
        for key, group in zip(keys, groups):
            size = sum(_nbytes(b) for b in group)
            lease = pool.acquire(size)
            try:
                at = 0
                for buffer in group:
                    n = _nbytes(buffer)
                    if n:
                        ctypes.memmove(lease.ptr + at, address_of(buffer), n)
                    at += n
                self._batch_put_one(key, lease.ptr, size, config)
            finally:
                lease.release()

    def _put_zero_copy(self, keys, groups, config):
        batch_put_from = _method(self.store, "batch_put_from")
        if batch_put_from is None:
            raise RuntimeError("zero-copy put requires store.batch_put_from")
        if any(len(g) != 1 for g in groups):
            raise RuntimeError("zero-copy put requires one contiguous buffer per chunk")
        _check_results(_call_write(batch_put_from, list(keys),
                                   [address_of(g[0]) for g in groups],
                                   [_nbytes(g[0]) for g in groups],
                                   config=config_for_keys(config, len(keys))),
                       keys, "batch_put_from")

    # direct-copy payloads

    def direct_copy_batches(self, arrays, chunk_bytes):
        """(first array, count, bytes) of each chunk, arrays kept whole; None when one array
        is larger than a chunk (the payload is then joined and split like bytes)."""
        batches, first, size = [], 0, 0
        for i, array in enumerate(arrays):
            n = array.nbytes
            if n > chunk_bytes:
                return None
            if size and size + n > chunk_bytes:
                batches.append((first, i - first, size))
                first, size = i, 0
            size += n
        if size:
            batches.append((first, len(arrays) - first, size))
        return batches

    def write_direct_copy(self, keys, arrays, batches, policy, config=None):
        """Chunk ``keys[i]`` gathered from ``arrays`` as ``batches[i]`` says, straight into a
        lease by the native copy, then a one-key batch_put_from."""
        pool = self.buffer_pool

        def put_batches(lo, hi):
            concat = hooks.concat_arrays_into()
            for key, (first, count, size) in zip(keys[lo:hi], batches[lo:hi]):
                lease = pool.acquire(size)
                try:
                    copied = concat(arrays, lease.ptr, size, first, count)
                    if copied != size:
                        raise RuntimeError(f"native fast-copy wrote {copied} bytes, expected "
                                           f"{size}")
                    self._batch_put_one(key, lease.ptr, size, config)
                finally:
                    lease.release()

        total = sum(b[2] for b in batches)
        parallel = (policy.put_mode != "batch" and policy.max_inflight_put > 1
                    and len(keys) >= AUTO_PARALLEL_MIN_CHUNKS and total >= AUTO_PARALLEL_MIN_BYTES)
        try:
            if not parallel:
                put_batches(0, len(keys))
            else:
                _run_parallel([lambda a=a, b=b: put_batches(a, b)
                               for a, b in _ranges(len(keys), policy.max_inflight_put)])
        except BaseException:
            self.remove_keys(keys, strict=False)
            raise

    def can_direct_copy(self):
        return (self.ensure_buffer_pool() is not None
                and _method(self.store, "batch_put_from") is not None
                and hooks.concat_arrays_into() is not None)

    # tensors

    def put_tensor(self, key, tensor, config=None):
        """A tensor as one store tensor object (``put_tensor``; ``pub_tensor`` with a
        config): the payload spec (``kind: "tensor"``), or None when the store has neither."""
        name = "put_tensor" if config is None else "pub_tensor"
        fn = _method(self.store, name)
        if fn is None:
            return None
        header = tensor_metadata_size()
        total = header + int(tensor.nbytes)
        check_status(_call_write(fn, key, tensor, config=config_for_keys(config, 1)),
                     "put_tensor", key)
        return {"key": key, "kind": "tensor", "bytes": total, "dtype": str(tensor.dtype),
                "shape": list(tensor.shape), "chunks": [{"key": key, "bytes": total}],
                "metadata_bytes": header}

    def write_tensor_object(self, key, ptr, size, config=None):
        """A whole tensor object at ``ptr`` written without a copy: ``put_tensor_from`` (no
        config), else ``put_from``."""
        config = config_for_keys(config, 1)
        put_tensor_from = _method(self.store, "put_tensor_from")
        put_from = _method(self.store, "put_from")
        if put_tensor_from is not None and config is None:
            status = put_tensor_from(key, ptr, size)
        elif put_from is not None:
            status = _call_write(put_from, key, ptr, size, config=config)
        else:
            raise RuntimeError("put_from is unavailable")
        check_status(status, "put_from", key)

    def put_blob(self, key, blob, config=None):
        status = _call_write(self.store.put, key, blob, config=config_for_keys(config, 1))
        check_status(status, "put", key)


def tensor_metadata_size():
    """Bytes of a store tensor object's header (0 without the store extension)."""
    try:
        from mooncake import store
    except Exception:  # noqa: BLE001
        return 0
    helper = getattr(store, "_tensor_metadata_size", None)
    return int(helper()) if callable(helper) else 0


__all__ = ["PutPath", "tensor_metadata_size"]
