"""asyncio forms of the store calls, as the reference's ``mooncake.async_store``.

:class:`MooncakeDistributedStoreAsync` is a ``MooncakeDistributedStore``; each of its methods
``X`` also has an awaitable form ``async_X`` with the same arguments and the same return value
(codes, bytes, lists: exactly what ``X`` returns; what ``X`` raises is raised by the await)::

    store = MooncakeDistributedStoreAsync()
    store.setup("127.0.0.1", "P2PHANDSHAKE", 64 << 20, 16 << 20, "tcp", "", master)
    rc = await store.async_put("k", b"v")          # 0
    data = await store.async_get("k")              # b"v"
    await store.async_close()

The blocking C call runs on the store's own thread pool (``max_workers`` threads, created on first
use), never on the event loop and never a thread per call. Cancelling an await is safe: a call that
has not started yet does not run at all; one already inside the C client finishes there and its
result is dropped, so the store and the pool stay consistent. ``close()`` / ``async_close()`` wait
for the calls in flight before closing the client; the store can be set up again afterwards.
"""

import asyncio
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from mooncake.store import MooncakeDistributedStore

__all__ = ["MooncakeDistributedStoreAsync"]

_PREFIX = "async_"


def _default_workers():
    return min(32, (os.cpu_count() or 1) + 4)


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """A MooncakeDistributedStore whose every method ``X`` is also awaitable as ``async_X``.

    ``max_workers`` bounds how many store calls run at once (default ``min(32, cpus + 4)``); more
    concurrent awaits queue for a worker.
    """

    def __init__(self, *, max_workers=None):
        if max_workers is not None:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int):
                raise TypeError(f"max_workers must be an int, not {max_workers!r}")
            if max_workers < 1:
                raise ValueError(f"max_workers must be at least 1, not {max_workers}")
        self._max_workers = max_workers or _default_workers()
        self._executor = None
        self._executor_lock = threading.Lock()

    @property
    def max_workers(self):
        """How many store calls may run at once."""
        return self._max_workers

    def _pool(self):
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self._max_workers,
                                                    thread_name_prefix="mooncake-async")
            return self._executor

    def _take_pool(self):
        with self._executor_lock:
            ex, self._executor = self._executor, None
            return ex

    def __getattr__(self, name):
        # Only reached when normal lookup fails: async_X for a method X of the store. The wrapper
        # is cached on the instance, so the next lookup is an ordinary attribute.
        if not name.startswith(_PREFIX):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        sync_name = name[len(_PREFIX):]
        if not sync_name or sync_name.startswith(("_", _PREFIX)):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        try:
            method = getattr(self, sync_name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"(nor '{sync_name}')") from None
        if not callable(method):
            raise AttributeError(f"'{sync_name}' is not callable")
        wrapper = self._wrap(method)
        setattr(self, name, wrapper)
        return wrapper

    def _wrap(self, method):
        @functools.wraps(method)
        async def call(*args, **kwargs):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool(),
                                              functools.partial(method, *args, **kwargs))

        return call

    def close(self):
        """Waits for the calls in flight, then closes the client (0, as the store's close)."""
        ex = self._take_pool()
        if ex is not None:
            ex.shutdown(wait=True)
        return MooncakeDistributedStore.close(self)

    async def async_close(self):
        """close() without blocking the event loop: waits for the calls in flight (off the loop),
        then closes the client. Returns close()'s code."""
        ex = self._take_pool()

        def work():
            if ex is not None:
                ex.shutdown(wait=True)
            return MooncakeDistributedStore.close(self)

        # Not on the store's pool: that pool is the thing being drained.
        return await asyncio.get_running_loop().run_in_executor(None, work)

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        await self.async_close()
        return False

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False
