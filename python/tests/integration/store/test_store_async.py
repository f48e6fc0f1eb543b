"""mooncake.async_store against a real master: every store method has an awaitable async_ form
with the same return value; the C calls run off the event loop on a bounded pool; cancelling is
safe; close waits for the calls in flight and the store sets up again."""

import asyncio
import ctypes
import hashlib
import inspect
import os
import signal
import threading
import time

import pytest

from mooncake.async_store import MooncakeDistributedStoreAsync
from mooncake.store import MooncakeDistributedStore


def _stop(master):
    """SIGSTOPs the master and waits until the kernel shows it stopped: a call made after this
    returns cannot have been answered by it, however loaded the machine is."""
    master.proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{master.proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError("the master did not stop")

MiB = 1 << 20


def setup_args(master, segment=32 * MiB):
    return ("127.0.0.1", "P2PHANDSHAKE", segment, 8 * MiB, "tcp", "", master.addr)


@pytest.fixture
def store(make_master):
    master = make_master()
    s = MooncakeDistributedStoreAsync(max_workers=4)
    assert s.setup(*setup_args(master)) == 0
    s.master = master
    yield s
    s.close()


class Probing(MooncakeDistributedStoreAsync):
    """Adds a Python method so a test can see where and how many calls run at once."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.threads = set()

    def probe(self, value, delay=0.05):
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.threads.add(threading.current_thread().name)
        time.sleep(delay)
        with self.lock:
            self.running -= 1
        return value


def test_surface():
    assert issubclass(MooncakeDistributedStoreAsync, MooncakeDistributedStore)
    s = MooncakeDistributedStoreAsync()
    names = [n for n in dir(MooncakeDistributedStore)
             if not n.startswith("_") and callable(getattr(MooncakeDistributedStore, n))]
    assert {"setup", "put", "get", "get_batch", "put_batch", "is_exist", "batch_is_exist",
            "remove", "remove_all", "remove_by_regex", "register_buffer", "unregister_buffer",
            "get_into", "batch_get_into", "put_from", "get_size", "close"} <= set(names)
    for n in names:
        f = getattr(s, "async_" + n)
        assert inspect.iscoroutinefunction(f), n
        assert n == "close" or f.__wrapped__ == getattr(s, n)  # the sync method it runs
    assert s.async_put is s.async_put  # made once, then an ordinary attribute
    assert s.max_workers == min(32, (os.cpu_count() or 1) + 4)
    for missing in ["async_no_such_call", "nothing", "async_", "async__private", "async_async_put"]:
        with pytest.raises(AttributeError):
            getattr(s, missing)
    s.not_callable = 3
    with pytest.raises(AttributeError, match="not callable"):
        s.async_not_callable


def test_constructor_arguments():
    assert MooncakeDistributedStoreAsync(max_workers=3).max_workers == 3
    for bad, exc in [(0, ValueError), (-1, ValueError), ("2", TypeError), (True, TypeError),
                     (2.0, TypeError)]:
        with pytest.raises(exc):
            MooncakeDistributedStoreAsync(max_workers=bad)
    with pytest.raises(TypeError):
        MooncakeDistributedStoreAsync(4)  # keyword only


def test_return_values_match_the_sync_calls(store):
    async def main():
        assert await store.async_put("k1", b"hello") == 0
        assert await store.async_get("k1") == b"hello"
        assert await store.async_get("missing") == b""
        assert await store.async_is_exist("k1") == 1
        assert await store.async_is_exist("missing") == 0
        assert await store.async_batch_is_exist(["k1", "missing", "k1"]) == [1, 0, 1]
        assert await store.async_put_batch(["a", "b"], [b"1", b"22"]) == 0
        assert await store.async_get_batch(["a", "b", "missing"]) == [b"1", b"22", b""]
        assert await store.async_get_size("b") == 2
        assert await store.async_get_size("missing") == store.get_size("missing") < 0
        assert await store.async_get_hostname() == store.get_hostname()
        assert await store.async_health_check() == 0
        assert await store.async_put_parts("p", b"ab", b"cd") == 0
        assert await store.async_get("p") == b"abcd"
        buf = (ctypes.c_ubyte * (1 * MiB))()
        ptr = ctypes.addressof(buf)
        assert await store.async_register_buffer(ptr, len(buf)) == 0
        assert await store.async_get_into("k1", ptr, len(buf)) == 5
        assert bytes(buf[:5]) == b"hello"
        assert await store.async_get_into("missing", ptr, len(buf)) == store.get_into(
            "missing", ptr, len(buf)) < 0
        ctypes.memmove(ptr, b"zero-copy", 9)
        assert await store.async_put_from("z", ptr, 9) == 0
        assert await store.async_batch_get_into(["z", "k1"], [ptr, ptr + 4096], [4096, 4096]) == [
            9, 5]
        assert await store.async_unregister_buffer(ptr) == 0
        assert await store.async_remove("missing") == store.remove("missing") < 0
        return await store.async_remove_by_regex("^no-such-prefix")

    assert asyncio.run(main()) == 0


def test_errors_are_raised_by_the_await(store):
    async def main():
        with pytest.raises(TypeError):
            await store.async_put(1, b"v")
        with pytest.raises(TypeError):
            await store.async_get_batch("not a list")
        with pytest.raises(TypeError, match="bogus"):
            await store.async_put("k", b"v", bogus=1)
        return await store.async_put("still-works", b"v")

    assert asyncio.run(main()) == 0


def test_many_concurrent_calls_and_another_process_sees_them(store, make_worker):
    values = {f"conc-{i}": os.urandom(1000 + i * 997) for i in range(48)}
    threads_before = threading.active_count()

    async def main():
        rcs = await asyncio.gather(*(store.async_put(k, v) for k, v in values.items()))
        got = await asyncio.gather(*(store.async_get(k) for k in values))
        return rcs, got

    rcs, got = asyncio.run(main())
    assert rcs == [0] * len(values)
    assert got == list(values.values())
    assert threading.active_count() - threads_before <= store.max_workers  # a pool, not 96 threads
    peer = make_worker()
    peer.setup(store.master, segment=0)
    digests = peer.run(f"result = [sha(store.get(k)) for k in {list(values)!r}]")
    assert digests == [hashlib.sha256(v).hexdigest() for v in values.values()]


def test_pool_is_bounded_and_off_the_loop():
    s = Probing(max_workers=2)

    async def main():
        loop_thread = threading.current_thread().name
        results = await asyncio.gather(*(s.async_probe(i) for i in range(10)))
        return loop_thread, results

    loop_thread, results = asyncio.run(main())
    assert results == list(range(10))
    assert s.peak == 2
    assert loop_thread not in s.threads and all(t.startswith("mooncake-async") for t in s.threads)
    assert len(s.threads) == 2
    s.close()


def test_loop_keeps_running_while_a_c_call_waits(make_master):
    master = make_master()
    s = MooncakeDistributedStoreAsync(max_workers=2)
    assert s.setup(*setup_args(master)) == 0
    assert s.put("k", b"v") == 0

    async def main():
        _stop(master)  # the next master round trip waits
        try:
            call = asyncio.ensure_future(s.async_get_size("k"))
            ticks = 0
            t_end = time.monotonic() + 0.5
            while time.monotonic() < t_end:
                await asyncio.sleep(0.01)
                ticks += 1
            assert not call.done()
        finally:
            master.proc.send_signal(signal.SIGCONT)
        return ticks, await call

    ticks, size = asyncio.run(main())
    assert ticks > 20
    assert size == 1
    assert s.close() == 0


def test_cancellation(make_master):
    master = make_master()
    s = MooncakeDistributedStoreAsync(max_workers=1)
    assert s.setup(*setup_args(master)) == 0

    async def main():
        _stop(master)
        try:
            running = asyncio.ensure_future(s.async_put("started", b"1"))
            await asyncio.sleep(0.2)  # now inside the C client, waiting for the master
            queued = asyncio.ensure_future(s.async_put("never-started", b"2"))
            await asyncio.sleep(0.05)
            queued.cancel()
            running.cancel()
            for t in (queued, running):
                with pytest.raises(asyncio.CancelledError):
                    await t
        finally:
            master.proc.send_signal(signal.SIGCONT)
        # The store is still usable, and the call that was running finished in the background.
        assert await s.async_put("after", b"3") == 0
        return await s.async_batch_is_exist(["started", "never-started", "after"])

    assert asyncio.run(main()) == [1, 0, 1]
    assert s.close() == 0


def test_close_waits_for_calls_in_flight_and_setup_again(make_master):
    master = make_master()
    s = Probing(max_workers=2)
    assert s.setup(*setup_args(master)) == 0

    async def main():
        slow = asyncio.ensure_future(s.async_probe("done", 0.3))
        await asyncio.sleep(0.05)
        assert s.running == 1
        assert await s.async_close() == 0
        assert s.running == 0 and slow.done() and slow.result() == "done"
        assert await s.async_put("k", b"v") < 0  # closed: a code, as the sync call
        assert await s.async_setup(*setup_args(master)) == 0  # a closed store sets up again
        assert await s.async_put("k", b"v") == 0
        return await s.async_get("k")

    assert asyncio.run(main()) == b"v"
    assert s.close() == 0
    assert s.close() == 0  # twice is fine


def test_async_with_and_with(make_master):
    master = make_master()

    async def main():
        async with MooncakeDistributedStoreAsync() as s:
            assert await s.async_setup(*setup_args(master)) == 0
            assert await s.async_put("ctx", b"v") == 0
        return s

    s = asyncio.run(main())
    assert s.health_check() == 1  # closed
    with MooncakeDistributedStoreAsync() as s2:
        assert s2.setup(*setup_args(master)) == 0
        assert s2.get("ctx") == b""  # it lived in the closed client's segment
        assert asyncio.run(s2.async_put("ctx", b"w")) == 0
        assert asyncio.run(s2.async_get("ctx")) == b"w"
    assert s2.health_check() == 1


def test_setup_failure_is_a_code(make_master):
    s = MooncakeDistributedStoreAsync()
    master = make_master()
    port = master.port
    master.stop()
    rc = asyncio.run(s.async_setup("127.0.0.1", "P2PHANDSHAKE", 0, MiB, "tcp", "",
                                   f"127.0.0.1:{port}"))
    assert isinstance(rc, int) and rc < 0
    s.close()
