"""Fixtures for the Store's multi-process tests: a real mooncake_master on ephemeral ports and
store clients, each in its own process (store_worker.py); the classes live in store_helpers."""

import pytest
from store_helpers import Master, Worker


@pytest.fixture
def make_master():
    masters = []

    def make(*flags, port=0):
        m = Master(*flags, port=port)
        masters.append(m)
        return m

    yield make
    for m in masters:
        m.stop()


@pytest.fixture
def make_worker():
    workers = []

    def make(env=None, stderr=None):
        w = Worker(env, stderr=stderr)
        workers.append(w)
        return w

    yield make
    for w in workers:
        w.close()


@pytest.fixture(scope="module")
def cluster():
    """A master, two storage clients and one pure client (global_segment_size=0), shared by the
    tests of a module that only add objects under their own keys."""
    master = Master()
    storage = [Worker(), Worker()]
    pure = Worker()
    try:
        names = [w.setup(master, segment=96 << 20) for w in storage]
        pure.setup(master, segment=0)
        yield master, storage, pure, names
    finally:
        for w in [pure, *storage]:
            w.close()
        master.stop()
