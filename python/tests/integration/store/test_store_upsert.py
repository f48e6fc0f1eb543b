"""Upserts, ranged reads, replica clearing and soft-pin actions, against a real master: the
reference's names and return conventions, and that a reader never sees a torn value."""

import ctypes
import threading
import time

import pytest
from store_helpers import c_buffer, local_store

from mooncake.store import ReplicateConfig, SoftPinAction

LEASE_MS = 300


@pytest.fixture
def master(make_master):
    return make_master(f"--default_kv_lease_ttl={LEASE_MS}")


_store = local_store  # 32 MiB segment, 8 MiB buffer


@pytest.fixture
def store(master):
    s = _store(master)
    yield s
    s.close()


_buf = c_buffer


def test_upsert_inserts_and_replaces_any_size(store):
    assert store.upsert("u-new", b"first") == 0
    assert store.get("u-new") == b"first"
    assert store.put("u-same", b"v1-abcd") == 0
    assert store.upsert("u-same", b"v2-wxyz") == 0
    assert store.get("u-same") == b"v2-wxyz"
    assert store.put("u-grow", b"short") == 0
    assert store.upsert("u-grow", b"a much longer value" * 100) == 0
    assert store.get("u-grow") == b"a much longer value" * 100
    assert store.upsert("u-grow", b"s") == 0
    assert store.get("u-grow") == b"s"
    assert store.get_size("u-grow") == 1
    # put keeps the first value, upsert does not.
    assert store.put("u-grow", b"ignored") == 0
    assert store.get("u-grow") == b"s"


def test_upsert_forms(store):
    assert store.upsert_parts("up-parts", b"Hello, ", b"World", b"!") == 0
    assert store.get("up-parts") == b"Hello, World!"
    assert store.upsert_parts("up-parts", b"again") == 0
    assert store.get("up-parts") == b"again"
    keys = ["ub-0", "ub-1", "ub-2"]
    assert store.put("ub-1", b"old") == 0
    assert store.upsert_batch(keys, [b"zero", b"one", b"two"]) == 0
    assert store.get_batch(keys) == [b"zero", b"one", b"two"]
    b, p = _buf(b"zero-copy upsert")
    assert store.register_buffer(p, len(b)) == 0
    assert store.upsert_from("uf", p, len(b)) == 0
    assert store.get("uf") == b"zero-copy upsert"
    b2, p2 = _buf(b"second value!!")
    assert store.register_buffer(p2, len(b2)) == 0
    assert store.batch_upsert_from(["uf", "uf2"], [p2, p], [len(b2), len(b)]) == [0, 0]
    assert store.get("uf") == b"second value!!"
    assert store.get("uf2") == b"zero-copy upsert"
    # The reference's answers to bad input.
    assert store.upsert_batch(["a", "b"], [b"x"]) == -600
    assert store.batch_upsert_from(["a", "b"], [p], [1, 2]) == [-600, -600]
    assert store.upsert("empty", b"") == -600
    with pytest.raises(TypeError):
        store.upsert(1, b"x")
    with pytest.raises(TypeError):
        store.upsert_parts("k", b"x", bogus=1)
    assert store.unregister_buffer(p) == 0
    assert store.unregister_buffer(p2) == 0


def test_upsert_across_clients(master):
    a, b = _store(master), _store(master)
    try:
        assert a.put("x-key", b"from a") == 0
        assert b.upsert("x-key", b"from b, longer") == 0
        assert a.get("x-key") == b"from b, longer"
        assert b.get("x-key") == b"from b, longer"
    finally:
        a.close()
        b.close()


def test_readers_never_see_a_torn_value(master):
    """Writers replace the value (different sizes) while readers read: every read is one whole
    value, and the key never goes missing."""
    writer, reader = _store(master), _store(master)
    values = [bytes([65 + i]) * (4096 * (i + 1)) for i in range(6)]
    assert writer.put("hot", values[0]) == 0
    stop = threading.Event()
    bad = []

    def read():
        while not stop.is_set():
            got = reader.get("hot")
            if got not in values:
                bad.append((len(got), got[:8]))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(150):
            assert writer.upsert("hot", values[i % len(values)]) == 0
    finally:
        stop.set()
        for t in threads:
            t.join()
        writer.close()
        reader.close()
    assert bad == []


def test_replaced_value_space_comes_back(master):
    """The old value's space is freed once its lease passes: upserting far more bytes than the
    segment holds succeeds."""
    s = _store(master, segment=8 << 20)
    try:
        v = b"x" * (3 << 20)
        assert s.put("big", v) == 0
        for i in range(10):
            assert s.get("big") is not None  # a lease on the current value
            assert s.upsert("big", bytes([i]) * (3 << 20)) == 0, i
            time.sleep(LEASE_MS / 1000 + 0.1)
        assert s.get("big") == bytes([9]) * (3 << 20)
    finally:
        s.close()


def test_get_into_ranges(store):
    d1 = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    d2 = b"abcdefghijklmnopqrstuvwxyz0123456789"
    assert store.put("r1", d1) == 0 and store.put("r2", d2) == 0
    b0 = (ctypes.c_ubyte * 32)()
    b1 = (ctypes.c_ubyte * 32)()
    p0, p1 = ctypes.addressof(b0), ctypes.addressof(b1)
    assert store.register_buffer(p0, 32) == 0 and store.register_buffer(p1, 32) == 0
    res = store.get_into_ranges([p0, p1], [["r1", "r2"], ["r2", "r1"]],
                                [[[0, 20], [8]], [[4], [16]]], [[[1, 30], [2]], [[0], [10]]],
                                [[[4, 3], [5]], [[6], [4]]])
    assert res == [[[4, 3], [5]], [[6], [4]]]
    assert bytes(b0[0:4]) == d1[1:5] and bytes(b0[20:23]) == d1[30:33]
    assert bytes(b0[8:13]) == d2[2:7]
    assert bytes(b1[4:10]) == d2[0:6] and bytes(b1[16:20]) == d1[10:14]
    # Mismatched lists, past the object's end, past the registered buffer, a missing key.
    mis = store.get_into_ranges([p0], [["r1", "r2"]], [[[0], []]], [[[0, 1], []]], [[[], []]])
    assert mis == [[[-600], []]]
    assert store.get_into_ranges([p0], [["r1"]], [[[0]]], [[[len(d1) - 1]]], [[[4]]]) == [[[-600]]]
    assert store.get_into_ranges([p0], [["r1"]], [[[31]]], [[[0]]], [[[4]]]) == [[[-600]]]
    miss = store.get_into_ranges([p0], [["nope", "r1"]], [[[0], [8]]], [[[0], [0]]],
                                 [[[4], [4]]])
    assert miss[0][0][0] == -704 and miss[0][1] == [4]
    assert store.get_into_ranges([p0, p1], [["r1"]], [[[0]]], [[[0]]], [[[1]]]) == [[[-600]]]
    with pytest.raises(TypeError):
        store.get_into_ranges([p0], [[1]], [[[0]]], [[[0]]], [[[1]]])
    assert store.unregister_buffer(p0) == 0 and store.unregister_buffer(p1) == 0


def test_batch_get_into_multi_buffer_ranges(store):
    data = bytes(range(256)) * 4
    assert store.put("mr", data) == 0
    bufs = [(ctypes.c_ubyte * 64)() for _ in range(3)]
    ptrs = [ctypes.addressof(b) for b in bufs]
    for p in ptrs:
        assert store.register_buffer(p, 64) == 0
    assert store.batch_get_session_start(["mr", "missing"]) == [0, -704]
    res = store.batch_get_into_multi_buffer_ranges(["mr", "missing"], [ptrs, [ptrs[0]]],
                                                   [[64, 10, 1], [4]], [[0, 500, 1023], [0]])
    assert res == [75, -704]
    assert bytes(bufs[0]) == data[0:64]
    assert bytes(bufs[1][:10]) == data[500:510]
    assert bufs[2][0] == data[1023]
    assert store.batch_get_into_multi_buffer_ranges(["mr"], [ptrs[:1]], [[1, 2]], [[0]]) == [-600]
    assert store.batch_get_into_multi_buffer_ranges(["mr"], [ptrs[:1]], [[8]], [[1020]]) == [-600]
    assert store.batch_get_into_multi_buffer_ranges(["mr", "x"], [], [], []) == [-600, -600]
    assert store.batch_get_session_end(["mr"]) == 0
    for p in ptrs:
        assert store.unregister_buffer(p) == 0


def test_batch_replica_clear(master):
    a, b = _store(master), _store(master)
    try:
        assert a.batch_replica_clear([]) == []
        for k in ("c0", "c1", "c2"):
            assert a.put(k, b"value-" + k.encode()) == 0
        assert a.get("c0") == b"value-c0"  # leased: not cleared
        assert a.batch_replica_clear(["c0", "c1", "missing"]) == ["c1"]
        assert a.get("c1") == b""
        assert a.get("c0") == b"value-c0"
        time.sleep(LEASE_MS / 1000 + 0.2)
        assert a.batch_replica_clear(["c0"]) == ["c0"]
        # One segment only: a replica elsewhere stays.
        cfg = ReplicateConfig(replica_num=2)
        assert a.put("c3", b"two copies", cfg) == 0
        assert len(a.get_replica_desc("c3")) == 2
        time.sleep(LEASE_MS / 1000 + 0.2)
        assert a.batch_replica_clear(["c3"], segment_name="nosuch:1") == []
        assert a.batch_replica_clear(["c3"], segment_name=b.get_hostname()) == ["c3"]
        reps = a.get_replica_desc("c3")
        assert [r.get_memory_descriptor().buffer_descriptor.transport_endpoint for r in reps] \
            == [a.get_hostname()]
        assert b.get("c3") == b"two copies"
        time.sleep(LEASE_MS / 1000 + 0.2)
        assert a.batch_replica_clear(["c3"], a.get_hostname()) == ["c3"]
        assert a.is_exist("c3") == 0
        assert a.get("c2") == b"value-c2"
        with pytest.raises(TypeError):
            a.batch_replica_clear("c2")
        with pytest.raises(TypeError):
            a.batch_replica_clear(["c2"], segment_name=5)
    finally:
        a.close()
        b.close()


def test_soft_pin_actions(store):
    cfg = ReplicateConfig()
    assert cfg.soft_pin_action == SoftPinAction.PRESERVE and cfg.soft_pin_ttl_ms is None
    assert not cfg.with_soft_pin
    cfg.with_soft_pin = True  # the older spelling
    assert cfg.soft_pin_action == SoftPinAction.ENABLE
    assert SoftPinAction.SOFT_PIN == SoftPinAction.ENABLE and SoftPinAction.NONE == 0
    for bad in (-1, 1 << 64, 1.5, "10"):
        with pytest.raises(TypeError):
            cfg.soft_pin_ttl_ms = bad
    with pytest.raises(TypeError):
        cfg.soft_pin_action = "ENABLE"
    with pytest.raises(ValueError):
        cfg.soft_pin_action = 7
    cfg.group_ids = ["group-a", ""]
    assert cfg.group_ids == ["group-a", ""]
    cfg.group_ids = None
    assert cfg.group_ids is None
    with pytest.raises(TypeError):
        cfg.group_ids = [1]
    assert "replica_num=1" in str(cfg)

    enable = ReplicateConfig(soft_pin_action=SoftPinAction.ENABLE, soft_pin_ttl_ms=1000)
    assert store.put("sp", b"pinned", enable) == 0
    # A TTL without ENABLE is the reference's -600.
    assert store.upsert("sp", b"x", ReplicateConfig(soft_pin_ttl_ms=1000)) == -600
    assert store.upsert("sp", b"x", ReplicateConfig(soft_pin_action=SoftPinAction.DISABLE,
                                                    soft_pin_ttl_ms=1000)) == -600
    assert store.upsert("sp", b"preserved") == 0
    assert store.upsert("sp", b"unpinned",
                        ReplicateConfig(soft_pin_action=SoftPinAction.DISABLE)) == 0
    assert store.get("sp") == b"unpinned"


def test_closed_store_batch_calls_fail_every_item(master):
    s = _store(master)
    assert s.close() == 0
    b, p = _buf(b"abc")
    assert s.batch_put_from(["a", "b"], [p, p], [3, 3]) == [-1010, -1010]
    assert s.batch_upsert_from(["a"], [p], [3]) == [-1010]
    assert s.put_batch(["a"], [b"x"]) == -1010
    assert s.batch_get_into(["a"], [p], [3]) == [-1010]
    assert s.batch_is_exist(["a"]) == [-1]
    assert s.batch_remove(["a"]) == [-1010]
    assert s.batch_replica_clear(["a"]) == []
    assert s.get_into_ranges([p], [["a"]], [[[0]]], [[[0]]], [[[1]]]) == [[[-1010]]]
    del b


def test_put_from_with_metadata_and_small_names(store):
    from mooncake.store import Descriptor, ObjectDataType, bind_to_numa_node

    meta, pm = _buf(b"META:")
    data, pd = _buf(b"payload bytes")
    assert store.register_buffer(pd, len(data)) == 0
    assert store.put_from_with_metadata("pm", pd, pm, len(data), len(meta)) == 0
    assert store.get("pm") == b"META:payload bytes"
    assert store.put_from_with_metadata("pm-empty", pd, pm, 0, len(meta)) == 0
    assert store.is_exist("pm-empty") == 0
    assert store.put_from_with_metadata("pm-nometa", pd, pm, len(data), 0) == 0
    assert store.get("pm-nometa") == b"payload bytes"
    with pytest.raises(TypeError):
        store.put_from_with_metadata(1, pd, pm, 1, 1)
    assert store.unregister_buffer(pd) == 0
    assert store.get_offload_rpc_read_count() == 0
    assert ObjectDataType.KVCACHE == 1 and ObjectDataType.GENERAL == 9
    d = Descriptor(4, 0x1000, "h:1")
    assert (d.size, d.buffer_address, d.transport_endpoint) == (4, 0x1000, "h:1")
    import os

    before = os.sched_getaffinity(0)
    try:
        from mooncake.store._extras import _cpulist

        with open("/sys/devices/system/node/node0/cpulist") as f:
            node0 = _cpulist(f.read())
        bind_to_numa_node(0)  # node 0 exists on every Linux host with NUMA sysfs
        assert os.sched_getaffinity(0) == node0
        assert _cpulist("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
        with pytest.warns(UserWarning, match="not available"):
            bind_to_numa_node(4095)
        with pytest.raises(TypeError):
            bind_to_numa_node("0")
    finally:
        os.sched_setaffinity(0, before)


def test_init_all_on_a_store_already_set_up(store):
    """init_all is setup with the reference's fixed choices; on a store that is set up already
    it answers -600 as the reference does, and leaves the store working."""
    assert store.init_all("tcp", "") == -600
    assert store.init_all("tcp", "", 16 << 20) == -600
    with pytest.raises(TypeError):
        store.init_all("tcp")
    assert store.put("after-init-all", b"ok") == 0 and store.get("after-init-all") == b"ok"
