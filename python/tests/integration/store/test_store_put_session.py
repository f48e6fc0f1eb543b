"""Put sessions (batch_put_session_start / batch_put_from_multi_buffer_ranges /
batch_put_session_end / batch_put_session_revoke) against a real master: the reference's shapes
and codes, readers never see a session's object before its end, and bad input."""

import threading

import pytest
from store_helpers import c_buffer, local_store

from mooncake.store import ReplicateConfig

INVALID_PARAMS, NOT_FOUND, EXISTS = -600, -704, -705


@pytest.fixture
def master(make_master):
    # A short discard timeout, for the abandoned-session test.
    return make_master("--default_kv_lease_ttl=300", "--put_start_discard_timeout_sec=1",
                       "--put_start_release_timeout_sec=2")


_store = local_store  # 32 MiB segment, 8 MiB buffer


@pytest.fixture
def store(master):
    s = _store(master)
    yield s
    s.close()


_buf = c_buffer


def test_layer_by_layer_then_end(store):
    """Two objects written page by page (the reference's KV-cache pattern), from registered and
    unregistered memory alike, become readable whole at the end."""
    page, layers = 4096, 4
    src = bytes(range(256)) * (2 * page * layers // 256)
    b, p = _buf(src)
    assert store.register_buffer(p, page * layers) == 0  # the first object's half only
    keys = ["ps-a", "ps-b"]
    assert store.batch_put_session_start(keys, [page * layers] * 2) == [0, 0]
    # Not readable before the end.
    assert store.is_exist("ps-a") == 0
    assert store.get("ps-a") == b""
    for layer in reversed(range(layers)):  # any order
        res = store.batch_put_from_multi_buffer_ranges(
            keys, [[p + i * page * layers + layer * page] for i in range(2)],
            [[page], [page]], [[layer * page], [layer * page]])
        assert res == [page, page]
    assert store.batch_put_session_end(keys) == [0, 0]
    assert store.get("ps-a") == src[:page * layers]
    assert store.get("ps-b") == src[page * layers:]
    # The session is gone: writing, ending or revoking it again is INVALID_PARAMS.
    assert store.batch_put_from_multi_buffer_ranges(["ps-a"], [[p]], [[page]], [[0]]) == [
        INVALID_PARAMS]
    assert store.batch_put_session_end(["ps-a"]) == [INVALID_PARAMS]
    assert store.batch_put_session_revoke(["ps-a"]) == [INVALID_PARAMS]


def test_several_ranges_per_key_and_replicas(master):
    writer, reader = _store(master), _store(master)
    try:
        parts = [b"head-", b"middle-", b"tail"]
        held = [_buf(x) for x in parts]
        total = sum(map(len, parts))
        cfg = ReplicateConfig()
        cfg.replica_num = 2
        assert writer.batch_put_session_start(["multi"], [total], cfg) == [0]
        offs = [0, len(parts[0]), len(parts[0]) + len(parts[1])]
        assert writer.batch_put_from_multi_buffer_ranges(
            ["multi"], [[h[1] for h in held]], [[len(x) for x in parts]], [offs]) == [total]
        assert writer.batch_put_session_end(["multi"]) == [0]
        assert reader.get("multi") == b"".join(parts)
        assert len(reader.get_replica_desc("multi")) == 2
    finally:
        writer.close()
        reader.close()


def test_revoke_leaves_nothing(store):
    b, p = _buf(b"z" * 1024)
    assert store.batch_put_session_start(["rv"], [1024]) == [0]
    assert store.batch_put_from_multi_buffer_ranges(["rv"], [[p]], [[1024]], [[0]]) == [1024]
    assert store.batch_put_session_revoke(["rv"]) == [0]
    assert store.is_exist("rv") == 0
    # The key is free again, for a session or a plain put.
    assert store.batch_put_session_start(["rv"], [3]) == [0]
    assert store.batch_put_session_revoke(["rv"]) == [0]
    assert store.put("rv", b"abc") == 0 and store.get("rv") == b"abc"


def test_bad_input(store):
    b, p = _buf(b"q" * 64)
    assert store.put("exists", b"v") == 0
    # Unequal lists, size 0, an existing key, a key twice, a bad key type.
    assert store.batch_put_session_start(["x1", "x2"], [8]) == [INVALID_PARAMS] * 2
    assert store.batch_put_session_start(["zero", "ok", "ok"], [0, 8, 8]) == [
        INVALID_PARAMS, 0, INVALID_PARAMS]
    assert store.batch_put_session_start(["exists"], [8]) == [EXISTS]
    assert store.batch_put_session_start(["ok"], [8]) == [INVALID_PARAMS]  # already open
    with pytest.raises(TypeError):
        store.batch_put_session_start([1], [8])
    with pytest.raises(TypeError):
        store.batch_put_session_start(["t"], [8], config="replicas")
    # Ranges past the object's end, empty, mismatched, for a key without a session: nothing of
    # the key is written; the session stays open and usable.
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[p]], [[9]], [[0]]) == [
        INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[p, p]], [[4, 4]], [[0, 6]]) == [
        INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[p]], [[0]], [[0]]) == [
        INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[]], [[]], [[]]) == [INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[p]], [[4, 4]], [[0]]) == [
        INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok", "none"], [[p], [p]], [[8], [8]],
                                                    [[0], [0]]) == [8, INVALID_PARAMS]
    assert store.batch_put_from_multi_buffer_ranges(["ok"], [[p]], [[8]], []) == [INVALID_PARAMS]
    assert store.batch_put_session_end(["ok", "ok", "none"]) == [0, INVALID_PARAMS,
                                                                 INVALID_PARAMS]
    assert store.get("ok") == b"q" * 8


def test_abandoned_session_is_discarded(master):
    """A session nobody ends is discarded by the master after put_start_discard_timeout_sec:
    its end then says the bytes are gone, and the key can be put again."""
    import time

    s = _store(master)
    try:
        assert s.batch_put_session_start(["stale"], [16]) == [0]
        deadline = time.time() + 10
        while s.put("stale", b"fresh") == 0 and s.get("stale") != b"fresh":
            assert time.time() < deadline
            time.sleep(0.2)
        assert s.batch_put_session_end(["stale"]) == [NOT_FOUND]
        assert s.get("stale") == b"fresh"
    finally:
        s.close()


def test_close_revokes_open_sessions(master):
    s = _store(master)
    assert s.batch_put_session_start(["left-open"], [16]) == [0]
    assert s.close() == 0
    other = _store(master)
    try:
        # Revoked at close: the key is free at once (no discard timeout to wait for).
        assert other.put("left-open", b"mine") == 0 and other.get("left-open") == b"mine"
    finally:
        other.close()
    # A closed store answers every key with the closed code.
    assert s.batch_put_session_start(["k"], [1]) == [-1010]
    assert s.batch_put_session_end(["k"]) == [-1010]


def test_end_waits_for_writes_in_flight(store):
    """Writers on several threads keep rewriting their ranges while the main thread ends the
    session: every write either completes before the end publishes the object or is refused
    (INVALID_PARAMS), never half-applied after it; the object reads back whole."""
    size, n = 1 << 20, 8
    chunk = size // n
    data = bytes(i % 251 for i in range(size))
    b, p = _buf(data)
    assert store.batch_put_session_start(["race"], [size]) == [0]
    seen = [set() for _ in range(n)]
    wrote = [threading.Event() for _ in range(n)]

    def write(i):
        while True:
            r = store.batch_put_from_multi_buffer_ranges(["race"], [[p + i * chunk]], [[chunk]],
                                                         [[i * chunk]])[0]
            seen[i].add(r)
            if r != chunk:
                return
            wrote[i].set()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for e in wrote:
        assert e.wait(10)
    assert store.batch_put_session_end(["race"]) == [0]
    for t in threads:
        t.join()
    assert all(x == {chunk, INVALID_PARAMS} for x in seen), seen
    assert store.get("race") == data
