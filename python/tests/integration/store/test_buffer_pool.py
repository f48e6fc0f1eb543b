"""mooncake.BufferPool / RegisteredBufferPool against a real master: leases are registered memory
that zero-copy store calls move to and from another process; the reference's lease and pool
rules (sizes, exhaustion, timeouts, views, close); bad arguments."""

import gc
import hashlib
import inspect
import os
import threading
import time

import pytest
from store_helpers import Master, Worker

import mooncake
from mooncake.buffer_pool import BufferLease, BufferPool, RegisteredBufferPool
from mooncake.store import MooncakeDistributedStore

KiB, MiB = 1 << 10, 1 << 20
NOT_REGISTERED = -600  # what the store answers for an unknown or overlapping registration


@pytest.fixture(scope="module")
def remote():
    """A master and a storage client in another process; the test process is a pure client, so
    every put and get moves bytes over the Transfer Engine between the two processes."""
    master = Master()
    peer = Worker()
    try:
        peer.setup(master, segment=64 * MiB)
        yield master, peer
    finally:
        peer.close()
        master.stop()


@pytest.fixture(scope="module")
def store(remote):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 4 * MiB, "tcp", "", remote[0].addr) == 0
    yield s
    s.close()


@pytest.fixture
def pools(store):
    made = []

    def make(*args, **kw):
        p = BufferPool(store, *args, **kw)
        made.append(p)
        return p

    yield make
    gc.collect()
    for p in made:
        p.close()


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def test_names_and_signature():
    assert mooncake.BufferPool is BufferPool is RegisteredBufferPool
    assert mooncake.RegisteredBufferPool is BufferPool
    assert {"BufferPool", "RegisteredBufferPool"} <= set(mooncake.__all__)
    params = inspect.signature(BufferPool).parameters
    assert [(n, p.default) for n, p in params.items()][:10] == [
        ("store", inspect.Parameter.empty), ("max_bytes", 0), ("min_size_class", 64 * KiB),
        ("max_size_class", None), ("alignment", 8 * MiB), ("block_on_exhaustion", True),
        ("default_timeout", None), ("max_regions", None), ("prewarm_size", None),
        ("prewarm_count", 0)]
    assert list(inspect.signature(BufferPool.acquire).parameters) == ["self", "size", "block",
                                                                      "timeout"]
    assert list(inspect.signature(BufferPool.buffer).parameters) == ["self", "size", "block",
                                                                     "timeout"]
    assert list(inspect.signature(BufferPool.prewarm).parameters) == ["self", "size", "count"]


def test_lease_moves_data_to_and_from_another_process(pools, store, remote):
    _, peer = remote
    pool = pools(min_size_class=4096, alignment=4096)
    data = os.urandom(1 * MiB + 123)
    with pool.acquire(len(data)) as lease:
        assert lease.size == len(data) and lease.ptr % 64 == 0
        lease.buffer[:] = data
        assert store.put_from("bp-out", lease.ptr, lease.size) == 0
    assert peer.run("result = sha(store.get('bp-out'))") == sha(data)

    assert peer.run("result = store.put('bp-in', pattern(300000, 7))") == 0
    with pool.acquire(400000) as lease:
        n = store.get_into("bp-in", lease.ptr, lease.size)
        assert n == 300000
        got = bytes(lease.buffer[:n])
    assert sha(got) == peer.run("result = sha(pattern(300000, 7))")


def test_batch_calls_into_many_leases(pools, store, remote):
    _, peer = remote
    pool = pools()
    keys = [f"bp-batch-{i}" for i in range(8)]
    values = [os.urandom(1000 * (i + 1)) for i in range(8)]
    leases = [pool.acquire(len(v)) for v in values]
    for lease, v in zip(leases, values):
        lease.buffer[:] = v
    assert store.batch_put_from(keys, [x.ptr for x in leases], [x.size for x in leases]) == [0] * 8
    assert peer.run(f"result = [sha(store.get(k)) for k in {keys!r}]") == [sha(v) for v in values]
    for x in leases:
        x.buffer[:] = b"\0" * x.size
    assert store.batch_get_into(keys, [x.ptr for x in leases], [x.size for x in leases]) == [
        len(v) for v in values]
    assert [sha(x.buffer) for x in leases] == [sha(v) for v in values]
    for x in leases:
        x.release()


def test_leases_are_registered_with_the_store_while_they_live(pools, store):
    # The store refuses a second registration overlapping a registered range and an
    # unregistration of an unknown one: that shows what the pool registered and when.
    pool = pools(local_bytes=256 * KiB, max_bytes=16 * MiB, alignment=64 * KiB)
    local = pool.acquire(100)
    start = local.ptr  # the first lease of a fresh pool starts its registered region
    assert store.register_buffer(local.ptr, 64) == NOT_REGISTERED
    over = pool.acquire(1 * MiB)  # does not fit the 256 KiB region: its own registration
    assert over.ptr % (64 * KiB) == 0
    assert not (start <= over.ptr < start + 256 * KiB)
    assert store.register_buffer(over.ptr, 4096) == NOT_REGISTERED
    over.buffer[:5] = b"hello"
    assert store.put_from("bp-overflow", over.ptr, 5) == 0
    over_ptr = over.ptr
    over.release()
    assert store.unregister_buffer(over_ptr) == NOT_REGISTERED  # unregistered at release
    assert store.get("bp-overflow") == b"hello"
    local.release()
    pool.close()
    assert store.unregister_buffer(start) == NOT_REGISTERED  # unregistered at close


def test_all_overflow_when_local_region_is_zero(pools, store):
    pool = pools(local_bytes=0, max_bytes=2 * MiB, alignment=4096)
    assert pool.max_bytes == 2 * MiB
    lease = pool.acquire(1000)
    assert lease.ptr % 4096 == 0
    assert store.register_buffer(lease.ptr, 1000) == NOT_REGISTERED
    lease.release()


def test_overflow_when_local_region_is_full(pools):
    pool = pools(local_bytes=1 * MiB)
    assert pool.max_bytes == 2 * MiB  # twice the local region by default
    full = pool.acquire(1 * MiB)
    extra = pool.acquire(1024, block=False)
    assert extra.size == 1024
    assert abs(extra.ptr - full.ptr) >= 1 * MiB
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1 * MiB, block=False)  # 2 MiB + 1 KiB would pass max_bytes
    extra.release()
    full.release()


def test_max_bytes_is_never_below_the_local_region(pools):
    assert pools(4096, local_bytes=1 * MiB).max_bytes == 1 * MiB
    assert pools(8 * MiB, local_bytes=1 * MiB).max_bytes == 8 * MiB


@pytest.mark.parametrize("size", [0, 1, 128 * KiB + 1])
def test_arbitrary_sizes(pools, size):
    pool = pools(1 * MiB, max_size_class=128 * KiB, alignment=4096)
    lease = pool.acquire(size)
    assert lease.size == size and len(lease.buffer) == size
    view = lease.buffer
    assert view.format == "B" and view.itemsize == 1 and not view.readonly
    del view
    lease.release()


def test_released_memory_is_reused(pools):
    pool = pools(local_bytes=1 * MiB, max_bytes=1 * MiB)
    for _ in range(20):
        lease = pool.acquire(1 * MiB, block=False)
        lease.release()
    a, b = pool.acquire(512 * KiB), pool.acquire(512 * KiB)
    a.release()
    c = pool.acquire(256 * KiB, block=False)  # fits where a was
    assert c.ptr == a._ptr
    b.release(), c.release()


def test_nonblocking_exhaustion_by_region_count(pools):
    pool = pools(min_size_class=4096, max_size_class=4096, alignment=4096, max_regions=1,
                 block_on_exhaustion=False)
    lease = pool.acquire(1)
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1)
    lease.release()
    pool.acquire(1).release()


def test_timeout_and_late_release(pools):
    pool = pools(max_regions=1)
    lease = pool.acquire(1)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out"):
        pool.acquire(1, timeout=0.3)
    assert time.monotonic() - t0 >= 0.29
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(1, block=False)
    got = []
    t = threading.Thread(target=lambda: got.append(pool.acquire(1, timeout=5.0)))
    t.start()
    time.sleep(0.1)
    assert not got
    lease.release()
    t.join(timeout=5)
    assert not t.is_alive() and len(got) == 1
    got[0].release()


def test_default_timeout(pools):
    pool = pools(max_regions=1, default_timeout=0.2)
    lease = pool.acquire(1)
    with pytest.raises(RuntimeError, match="timed out"):
        pool.acquire(1)
    lease.release()


def test_blocked_acquire_lets_other_threads_run(pools):
    pool = pools(max_regions=1)
    lease = pool.acquire(1)
    got, ticks = [], []
    t = threading.Thread(target=lambda: got.append(pool.acquire(1)))
    t.start()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        ticks.append(1)
        time.sleep(0.001)
    assert len(ticks) > 50 and not got  # this thread kept running while the other waited
    lease.release()
    t.join(timeout=5)
    assert not t.is_alive()
    got[0].release()


def test_views_keep_the_lease_alive(pools):
    pool = pools(4096, min_size_class=4096, alignment=4096)
    lease = pool.acquire(4)
    view = lease.buffer
    view[:] = b"test"
    part = view[1:3]
    del view
    gc.collect()
    with pytest.raises(RuntimeError, match="exported views"):
        lease.release()  # the slice still refers to the memory
    assert bytes(part) == b"es"
    del part
    gc.collect()
    lease.release()
    lease.release()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        lease.ptr
    with pytest.raises(RuntimeError, match="closed"):
        lease.buffer
    assert lease.size == 4


def test_dropping_a_lease_with_a_live_view_keeps_the_memory(pools):
    pool = pools(1 * MiB)
    lease = pool.acquire(8)
    view = lease.buffer
    del lease
    gc.collect()
    view[:] = b"12345678"  # still the lease's memory, not freed
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    assert bytes(view) == b"12345678"
    del view
    gc.collect()
    pool.close()


def test_lease_released_by_its_destructor(pools):
    pool = pools(4096, min_size_class=4096, alignment=4096, max_regions=1)
    lease = pool.acquire(1)
    del lease
    gc.collect()
    pool.acquire(1, block=False).release()
    pool.close()


def test_close_rules(pools):
    pool = pools(1 * MiB)
    lease = pool.acquire(1)
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    lease.release()
    pool.close()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(1)


def test_pool_as_context_manager(store):
    with BufferPool(store, local_bytes=64 * KiB) as pool:
        with pool.acquire(10) as lease:
            lease.buffer[:2] = b"ok"
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(1)


def test_prewarm_arguments(pools):
    pool = pools(1 * MiB, min_size_class=4096, alignment=4096, prewarm_size=1024, prewarm_count=2)
    a, b = pool.acquire(1024), pool.acquire(1024)
    a.release(), b.release()
    pool.prewarm(1024, 4)
    with pytest.raises(TypeError):
        pool.prewarm("1024", 1)


def test_concurrent_leases_never_overlap(pools):
    pool = pools(local_bytes=1 * MiB, max_bytes=2 * MiB, alignment=4096)
    errors = []

    def work(seed):
        try:
            for i in range(40):
                size = 1000 + (seed * 7919 + i * 104729) % 200000
                with pool.acquire(size, timeout=10) as lease:
                    fill = bytes([seed]) * size
                    lease.buffer[:] = fill
                    time.sleep(0.0005)
                    if bytes(lease.buffer) != fill:
                        errors.append(f"thread {seed}: lease memory overwritten")
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    lease = pool.acquire(2 * MiB, block=False)  # everything came back
    lease.release()


def test_bad_arguments(pools, store):
    pool = pools(1 * MiB)
    with pytest.raises(RuntimeError, match="capacity"):
        pool.acquire((1 << 64) - 1)
    with pytest.raises(RuntimeError, match="capacity"):
        pool.acquire(pool.max_bytes + 1)
    for bad in ["1", 1.0, None, True]:
        with pytest.raises(TypeError):
            pool.acquire(bad)
    for bad in [-1, 1 << 64]:
        with pytest.raises(TypeError):
            pool.acquire(bad)
    with pytest.raises(RuntimeError, match="non-negative"):
        pool.acquire(1, timeout=-1)
    with pytest.raises(TypeError):
        pool.acquire(1, timeout="1")
    with pytest.raises(RuntimeError, match="alignment"):
        BufferPool(store, 1 * MiB, alignment=12345)
    with pytest.raises(RuntimeError, match="alignment"):
        BufferPool(store, 1 * MiB, alignment=4)
    with pytest.raises(RuntimeError, match="positive"):
        BufferPool(store, 1 * MiB, alignment=0)
    with pytest.raises(RuntimeError, match="positive"):
        BufferPool(store, min_size_class=0)
    with pytest.raises(TypeError):
        BufferPool(store, max_bytes="1gb")
    with pytest.raises(TypeError):
        BufferPool(store, max_regions=-1)
    with pytest.raises(TypeError):
        BufferPool(store, default_timeout="soon")
    with pytest.raises(RuntimeError, match="not initialized"):
        BufferPool(None)
    with pytest.raises(RuntimeError, match="register_buffer"):
        BufferPool(object())
    with pytest.raises(RuntimeError, match="not initialized"):
        BufferPool(MooncakeDistributedStore())  # never set up
    assert isinstance(pool.acquire(0), BufferLease)


def test_closed_store_is_refused(remote):
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 1 * MiB, "tcp", "", remote[0].addr) == 0
    assert s.close() == 0
    with pytest.raises(RuntimeError, match="not initialized"):
        BufferPool(s, local_bytes=0)
