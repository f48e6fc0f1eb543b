"""close() while other threads are inside calls on the same TransferEngine: the C engine owns
its calls in flight, so close neither raises nor pulls memory away from them; each thread's call
ends with 0 or an error code, the peer keeps serving, and the engine is closed afterwards."""

import threading
import time

from te_helpers import pattern, sha

MiB = 1 << 20
CLOSED_CODES = {-1, -202}  # refused by the binding after close / by the engine while closing


def test_close_while_threads_transfer(spawn_peer, make_engine):
    peer = spawn_peer(size=8 * MiB)
    engine = make_engine()
    buf = engine.allocate_managed_buffer(MiB)
    assert buf != 0
    assert engine.write_bytes_to_buffer(buf, pattern(3, MiB), MiB) == 0
    results = [[] for _ in range(4)]
    stop = threading.Event()

    def transfer(i):
        while not stop.is_set():
            if i == 3:  # the other calls: segments and registrations
                rc = engine.get_first_buffer_address(peer.name)
                rc = 0 if rc > 0 else -1
            elif i % 2:
                rc = engine.transfer_sync_read(peer.name, buf, peer.addr + i * MiB, MiB)
            else:
                rc = engine.transfer_sync_write(peer.name, buf, peer.addr + i * MiB, MiB)
            results[i].append(rc)
            if rc != 0:
                return

    threads = [threading.Thread(target=transfer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    engine.close()  # used to raise RuntimeError while a thread was inside a call
    for t in threads:
        t.join(30)
    stop.set()
    assert not any(t.is_alive() for t in threads)
    for i, r in enumerate(results):
        assert r, f"thread {i} made no call"
        assert all(rc == 0 for rc in r[:-1]), (i, r[-5:])
        assert r[-1] in CLOSED_CODES, (i, r[-5:])
    # closed for good, and idempotent
    assert engine.transfer_sync_write(peer.name, buf, peer.addr, MiB) == -1
    assert engine.get_engine_ptr() == 0
    engine.close()

    # the peer lost nothing: a new engine writes to it (past the threads' regions, which a write
    # cut by the close but already on the wire may still reach)
    other = make_engine()
    b2 = other.allocate_managed_buffer(MiB)
    data = pattern(4, MiB)
    assert other.write_bytes_to_buffer(b2, data, MiB) == 0
    assert other.transfer_sync_write(peer.name, b2, peer.addr + 5 * MiB, MiB) == 0
    assert peer.sha(5 * MiB, MiB) == sha(data)


def test_segment_cache_is_the_engines(spawn_peer, make_engine):
    """The binding keeps no segment table of its own: repeated transfers and
    get_first_buffer_address reach the peer through the engine's open-or-get, and an unknown
    name fails with an error code."""
    peer = spawn_peer(size=2 * MiB)
    engine = make_engine()
    buf = engine.allocate_managed_buffer(MiB)
    data = pattern(5, MiB)
    assert engine.write_bytes_to_buffer(buf, data, MiB) == 0
    assert engine.transfer_sync_write(peer.name, buf, peer.addr, MiB) == 0
    assert engine.transfer_sync_write(peer.name, buf, peer.addr, MiB) == 0
    assert peer.sha(0, MiB) == sha(data)
    assert engine.transfer_sync_write("127.0.0.1:1", buf, 4096, MiB) < 0
    assert engine.get_first_buffer_address(peer.name) == peer.addr
