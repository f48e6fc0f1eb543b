"""Pools of registered memory for zero-copy store calls, as the reference's ``BufferPool``.

A lease is ``size`` bytes of memory the store's Transfer Engine has registered, so its address can
go straight to ``put_from`` / ``get_into`` / ``batch_*`` without a copy::

    pool = BufferPool(store)                    # store: a set-up MooncakeDistributedStore
    with pool.acquire(1 << 20) as lease:
        n = store.get_into("key", lease.ptr, lease.size)
        data = bytes(lease.buffer[:n])          # lease.buffer: a writable memoryview
    pool.close()

Where the memory comes from: the reference carves leases out of the store client's own local
buffer and registers extra ("overflow") memory when that is full. This client keeps its staging
buffer private, so the pool registers one region of its own at construction, ``local_bytes``
(default 16 MiB, the reference's default ``local_buffer_size``), and carves leases out of it
(64-byte aligned); a lease that does not fit there gets its own memory, aligned to ``alignment``
and registered with ``store.register_buffer`` while it lives. ``max_bytes`` bounds everything
leased at once (default twice ``local_bytes``; never less than ``local_bytes``), ``max_regions``
the number of leases. When the pool is full, ``acquire`` waits (``block``, ``timeout``) or raises.

Errors are RuntimeError with the reference's messages ("buffer pool is exhausted", "timed out
waiting for buffer", "cannot release buffer while exported views exist", "cannot close buffer pool
with active leases", ...). Thread-safe; waiting does not hold the GIL. Pure Python over the store's
``register_buffer`` / ``unregister_buffer``: importing this module loads no native code.
"""

import bisect
import ctypes
import mmap
import threading
import time
import weakref

__all__ = ["BufferPool", "RegisteredBufferPool", "BufferLease", "RegisteredBufferLease"]

_LOCAL_ALIGN = 64  # the reference's local-buffer allocations are cache-line aligned
_DEFAULT_LOCAL_BYTES = 16 << 20
_SIZE_MAX = (1 << 64) - 1


def _size_arg(name, value, *, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0 or value > _SIZE_MAX:
        raise TypeError(f"{name} must be in 0..2**64-1, not {value}")
    return value


class _Scoped:
    """What a lease and a pool share: a ``with`` block ends the object (``_end``: release or
    close), and the finalizer frees what the caller forgot (``_finalize``), silently, as a
    finalizer has nobody to report to."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._end()
        return False

    def __del__(self):
        try:
            self._finalize()
        except Exception:  # noqa: BLE001 - nothing to report to from a finalizer
            pass


class _Memory:
    """Anonymous mmap memory with an aligned start address; freed by close()."""

    def __init__(self, size, alignment):
        span = size + (alignment if alignment > mmap.PAGESIZE else 0)
        self._map = mmap.mmap(-1, max(span, 1))
        self._anchor = ctypes.c_char.from_buffer(self._map)  # pins the map while we use it
        base = ctypes.addressof(self._anchor)
        self.addr = (base + alignment - 1) // alignment * alignment
        self.size = size

    def close(self):
        if self._map is not None:
            del self._anchor
            self._map.close()
            self._map = None


class _Arena:
    """First-fit sub-allocator over one registered region; free ranges kept sorted and merged."""

    def __init__(self, mem):
        self.mem = mem
        self.free = [(mem.addr, mem.size)] if mem.size else []  # (start, length), by start

    def take(self, size):
        size = (size + _LOCAL_ALIGN - 1) // _LOCAL_ALIGN * _LOCAL_ALIGN
        for i, (start, length) in enumerate(self.free):
            if length >= size:
                if length == size:
                    del self.free[i]
                else:
                    self.free[i] = (start + size, length - size)
                return start, size
        return None

    def give(self, start, size):
        i = bisect.bisect_left(self.free, (start, 0))
        if i < len(self.free) and start + size == self.free[i][0]:
            size += self.free[i][1]
            del self.free[i]
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == start:
            start, size = self.free[i - 1][0], self.free[i - 1][1] + size
            del self.free[i - 1]
            i -= 1
        self.free.insert(i, (start, size))


class BufferLease(_Scoped):
    """``size`` bytes of registered memory at ``ptr``, until release() (or the end of a with-block,
    or the lease's garbage collection). ``buffer`` is a writable memoryview of exactly those bytes;
    while any view of it lives the lease stays valid and release() refuses."""

    __slots__ = ("_pool", "_ptr", "_size", "_span", "_overflow", "_exports", "_lock", "__weakref__")

    def __init__(self, pool, ptr, size, span, overflow):
        self._pool = pool
        self._ptr = ptr
        self._size = size
        self._span = span  # arena bytes taken, or the overflow _Memory
        self._overflow = overflow
        self._exports = 0
        self._lock = threading.Lock()

    @property
    def ptr(self):
        if self._pool is None:
            raise RuntimeError("buffer lease is closed")
        return self._ptr

    @property
    def size(self):
        return self._size

    @property
    def buffer(self):
        if self._pool is None:
            raise RuntimeError("buffer lease is closed")
        # A fresh ctypes array per view: it keeps this lease alive, and its finalizer tells us when
        # the last memoryview (or slice of one) made from it is gone.
        arr = (ctypes.c_ubyte * self._size).from_address(self._ptr)
        arr._mooncake_lease = self
        with self._lock:
            self._exports += 1
        weakref.finalize(arr, self._unexport)
        return memoryview(arr).cast("B")

    def _unexport(self):
        with self._lock:
            self._exports -= 1

    def release(self):
        """Returns the memory to the pool. RuntimeError while views of ``buffer`` exist; a second
        release is a no-op."""
        self._release(check_views=True)

    def _release(self, check_views):
        with self._lock:
            pool = self._pool
            if pool is None:
                return
            if check_views and self._exports:
                raise RuntimeError("cannot release buffer while exported views exist")
            self._pool = None
        pool._give_back(self)

    def _end(self):
        self.release()

    def _finalize(self):
        self._release(check_views=False)

    def __repr__(self):
        state = "released" if self._pool is None else f"ptr=0x{self._ptr:x}"
        return f"<BufferLease size={self._size} {state}>"


class BufferPool(_Scoped):
    """Leases of registered memory for ``store`` (a set-up MooncakeDistributedStore).

    Arguments are the reference's (``max_bytes=0``: twice the local region; ``min_size_class`` and
    ``max_size_class`` are validated and kept for compatibility, leases being sized exactly;
    ``alignment``: a power of two of at least 8, for overflow memory; ``block_on_exhaustion`` and
    ``default_timeout`` (seconds, None: forever) for acquire; ``max_regions``: most leases at once;
    ``prewarm_size`` / ``prewarm_count``: accepted, the local region being registered up front).
    ``local_bytes`` (keyword, this implementation's): size of the pool's own registered region.
    """

    def __init__(self, store, max_bytes=0, min_size_class=64 * 1024, max_size_class=None,
                 alignment=8 * 1024 * 1024, block_on_exhaustion=True, default_timeout=None,
                 max_regions=None, prewarm_size=None, prewarm_count=0, *, local_bytes=None):
        if store is None:
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        if not (callable(getattr(store, "register_buffer", None))
                and callable(getattr(store, "unregister_buffer", None))):
            raise RuntimeError("BufferPool store parameter must be a MooncakeDistributedStore "
                               "(an object with register_buffer and unregister_buffer)")
        max_bytes = _size_arg("max_bytes", max_bytes)
        min_size_class = _size_arg("min_size_class", min_size_class)
        max_size_class = _size_arg("max_size_class", max_size_class, allow_none=True)
        alignment = _size_arg("alignment", alignment)
        max_regions = _size_arg("max_regions", max_regions, allow_none=True)
        _size_arg("prewarm_size", prewarm_size, allow_none=True)
        _size_arg("prewarm_count", prewarm_count)
        local = _size_arg("local_bytes", _DEFAULT_LOCAL_BYTES if local_bytes is None
                          else local_bytes)
        if default_timeout is not None:
            if isinstance(default_timeout, bool) or not isinstance(default_timeout, (int, float)):
                raise TypeError("default_timeout must be a number of seconds or None")
        if min_size_class == 0 or alignment == 0:
            raise RuntimeError("min_size_class and alignment must be positive")
        if alignment < ctypes.sizeof(ctypes.c_void_p) or alignment & (alignment - 1):
            raise RuntimeError("alignment must be a power of two and at least sizeof(void*)")
        health = getattr(store, "health_check", None)
        if callable(health) and health() == 1:  # 1: never set up, or closed
            raise RuntimeError("MooncakeDistributedStore is not initialized")

        self._store = store
        self._alignment = alignment
        self._block = bool(block_on_exhaustion)
        self._timeout = None if default_timeout is None else float(default_timeout)
        self._max_regions = max_regions
        self._max_bytes = 2 * local if max_bytes == 0 else max(max_bytes, local)
        self.min_size_class = min_size_class
        self.max_size_class = self._max_bytes if max_size_class is None else max_size_class
        self._cond = threading.Condition()
        self._active = 0
        self._bytes = 0  # leased plus reserved
        self._closed = False
        self._arena = None
        if local:
            mem = _Memory(local, mmap.PAGESIZE)
            rc = store.register_buffer(mem.addr, mem.size)
            if rc != 0:
                mem.close()
                raise RuntimeError(f"cannot register the pool's buffer ({local} bytes): code {rc}")
            self._arena = _Arena(mem)

    @property
    def max_bytes(self):
        """Most bytes leased at once."""
        return self._max_bytes

    def acquire(self, size, block=None, timeout=None):
        """A lease of ``size`` bytes (0 is allowed). ``block`` (default: block_on_exhaustion)
        waits for room, up to ``timeout`` seconds (default: default_timeout; None: forever).
        RuntimeError when the size exceeds max_bytes, the pool is exhausted (not blocking), the
        wait timed out, or the pool is closed."""
        size = _size_arg("size", size)
        wait = self._block if block is None else bool(block)
        limit = self._timeout
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise TypeError("timeout must be a number of seconds or None")
            limit = float(timeout)
        if limit is not None and limit < 0:
            raise RuntimeError("timeout must be non-negative")
        need = max(size, 1)
        if need > self._max_bytes:
            raise RuntimeError("requested buffer size exceeds pool capacity")
        deadline = None if limit is None else time.monotonic() + limit
        with self._cond:
            while True:
                self._check_open()
                if self._room_for(need):
                    break
                if not wait:
                    raise RuntimeError("buffer pool is exhausted")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise RuntimeError("timed out waiting for buffer")
                self._cond.wait(left)
            self._bytes += need
            self._active += 1
            got = self._arena.take(need) if self._arena is not None else None
        if got is not None:
            lease = BufferLease(self, got[0], size, got[1], False)
        else:
            try:
                lease = self._overflow(size, need)
            except BaseException:
                with self._cond:
                    self._bytes -= need
                    self._active -= 1
                    self._cond.notify_all()
                raise
        return lease

    def buffer(self, size, block=None, timeout=None):
        """Same as acquire()."""
        return self.acquire(size, block, timeout)

    def prewarm(self, size, count):
        """Accepted for compatibility (the local region is registered when the pool is made)."""
        _size_arg("size", size)
        _size_arg("count", count)

    def close(self):
        """Unregisters and frees the pool's memory. RuntimeError while leases are active; closing
        twice is fine."""
        with self._cond:
            if self._closed:
                return
            if self._active:
                raise RuntimeError("cannot close buffer pool with active leases")
            self._closed = True
            self._cond.notify_all()
            arena, self._arena = self._arena, None
        if arena is not None:
            try:
                self._store.unregister_buffer(arena.mem.addr)
            finally:
                arena.mem.close()

    def _end(self):
        self.close()

    def _finalize(self):
        if not self._closed and not self._active:
            self.close()

    # ---- internals ------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise RuntimeError("buffer pool is closed")

    def _room_for(self, need):
        if self._bytes + need > self._max_bytes:
            return False
        return self._max_regions is None or self._active < self._max_regions

    def _overflow(self, size, need):
        mem = _Memory(need, self._alignment)
        rc = self._store.register_buffer(mem.addr, need)
        if rc != 0:
            mem.close()
            raise RuntimeError(f"overflow buffer registration failed (code {rc})")
        return BufferLease(self, mem.addr, size, mem, True)

    def _give_back(self, lease):
        err = None
        if lease._overflow:
            try:
                rc = self._store.unregister_buffer(lease._ptr)
                if rc != 0:
                    err = RuntimeError(f"overflow buffer unregistration failed (code {rc})")
            finally:
                lease._span.close()
        with self._cond:
            if not lease._overflow and self._arena is not None:
                self._arena.give(lease._ptr, lease._span)
            self._bytes -= max(lease._size, 1)
            self._active -= 1
            self._cond.notify_all()
        if err is not None:
            raise err


RegisteredBufferPool = BufferPool
RegisteredBufferLease = BufferLease
