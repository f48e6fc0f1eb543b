"""Store clients whose Transfer Engines find each other through a real etcd
(``metadata_server="etcd://..."``, passed through to the engine): data put by one client is read
by the other and checked by SHA-256; a client's segment key lives on an etcd lease and leaves
etcd when the client closes; an unreachable etcd fails setup with a code instead of hanging."""

import sys
import time
from pathlib import Path

import pytest
from store_helpers import Master, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from etcd_helpers import Etcd, etcd_binary, free_port  # noqa: E402

pytestmark = pytest.mark.skipif(not etcd_binary(), reason="needs etcd (Debian: etcd-server)")


@pytest.fixture(scope="module")
def etcd():
    e = Etcd()
    yield e
    e.stop()


def _setup(w, master, metadata, segment):
    return w.run(f"result = store.setup('127.0.0.1', {metadata!r}, {segment}, {16 << 20}, "
                 f"'tcp', '', {master.addr!r})")


def test_two_clients_on_etcd_move_data(etcd):
    master = Master()
    a, b = Worker(), Worker()
    try:
        assert _setup(a, master, etcd.url, 64 << 20) == 0
        assert _setup(b, master, etcd.url, 64 << 20) == 0
        names = [w.run("result = store.get_hostname()") for w in (a, b)]
        keys = etcd.keys("mooncake/ram/")
        for n in names:
            assert f"mooncake/ram/{n}" in keys
            assert etcd.get(f"mooncake/ram/{n}")["lease"] != 0
        for size in (1, 300_000, 4 << 20):
            key = f"etcd-obj-{size}"
            put = a.run(f"v = pattern({size}, 'e{size}'); result = [store.put({key!r}, v), sha(v)]")
            assert put[0] == 0
            assert b.run(f"v = store.get({key!r}); result = [len(v), sha(v)]") == [size, put[1]]
        b.close()
        assert f"mooncake/ram/{names[1]}" not in etcd.keys("mooncake/ram/")
    finally:
        a.close()
        b.close()
        master.stop()
    assert etcd.keys("mooncake/ram/") == []


def test_setup_with_unreachable_etcd_fails_fast():
    master = Master()
    w = Worker()
    try:
        t0 = time.monotonic()
        # the engine's METADATA (-200) becomes the store's INVALID_PARAMS at its boundary, as
        # every engine start failure does (the log names the cause)
        rc = _setup(w, master, f"etcd://127.0.0.1:{free_port()}", 16 << 20)
        assert rc == -600
        assert time.monotonic() - t0 < 10
        assert _setup(w, master, "etcd://", 16 << 20) == -600  # malformed
    finally:
        w.close()
        master.stop()
