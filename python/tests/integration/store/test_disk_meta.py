"""The disk tier's metadata across the master's own restarts and failovers, with real processes:
a master with a metadata log (--metadata_dir) killed with SIGKILL while most objects live on a
storage node's disk only serves every one of them again (by checksum) once the node announces;
objects removed while the node was down stay removed when it comes back, after a master
restart and after an HA failover alike; and ranged reads of disk-only objects are served from
the disk, with their bounds checked."""

import signal
import sys
import uuid
from pathlib import Path

import pytest
from ha_helpers import HaAddress, HaMaster
from node_helpers import Node
from store_helpers import Worker, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from etcd_helpers import EtcdCluster, etcd_binary  # noqa: E402

MIB = 1 << 20
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OFFLOAD = ("--enable_offload", "--default_kv_lease_ttl=200", "--client_ttl=3")


def disk_node(master, root, segment="32mb"):
    return Node(master, segment=segment, http=True,
                extra=[f"--root_fs_dir={root}", "--disk_capacity=256mb"])


def put_many(worker, prefix, n, size=MIB):
    """Puts n objects; {key: sha} of what was put."""
    return worker.run(
        f"out = {{}}\n"
        f"for i in range({n}):\n"
        f"    k = '{prefix}' + str(i)\n"
        f"    v = pattern({size}, k)\n"
        f"    assert store.put(k, v) == 0, k\n"
        f"    out[k] = sha(v)\n"
        f"result = out")


def digests(worker, keys):
    return worker.run(f"result = {{k: sha(store.get(k)) for k in {list(keys)!r}}}")


def disk_only(worker, keys):
    got = worker.run(
        f"d = store.batch_get_replica_desc({list(keys)!r})\n"
        f"result = [k for k, v in d.items() if v and all(r.is_local_disk_replica() for r in v)]")
    return sorted(got)


def removed_stay_gone(worker, keys):
    return worker.run(f"result = [[store.is_exist(k), len(store.get(k))] for k in {keys!r}]") \
        == [[0, 0]] * len(keys)


def test_master_restart_with_a_log_keeps_disk_copies_and_removals(make_master, make_worker,
                                                                 tmp_path):
    meta, root = str(tmp_path / "meta"), str(tmp_path / "tier")
    master = make_master(*OFFLOAD, f"--metadata_dir={meta}")
    node = disk_node(master, root)
    pure = make_worker()
    pure.setup(master, segment=0)
    try:
        n = 64  # twice the node's memory: most objects end on its disk only
        want = put_many(pure, "m", n)
        assert wait_for(lambda: node.metric("mooncake_disk_offloads_total") >= n, 30)
        only = disk_only(pure, want)
        assert len(only) >= n - 32, only
        # kill -9 the master: its log knows which disk holds which copy.
        port = master.port
        master.stop(signal.SIGKILL)
        master = make_master(*OFFLOAD, f"--metadata_dir={meta}", port=port)
        assert wait_for(lambda: pure.run(f"result = store.is_exist({only[0]!r})") == 1, 30)
        assert digests(pure, want) == want
        assert node.metric("mooncake_disk_stale_copies_total") == 0
        # The node goes down; objects are removed meanwhile; the master restarts; the node comes
        # back with the removed objects still on its disk: they stay gone.
        node.stop()
        gone = only[:6] + [k for k in want if k not in only][:2]
        assert pure.run(f"result = [store.remove(k) for k in {gone!r}]") == [0] * len(gone)
        master.stop(signal.SIGKILL)
        master = make_master(*OFFLOAD, f"--metadata_dir={meta}", port=port)
        node = disk_node(master, root)
        kept = [k for k in only if k not in gone]
        assert wait_for(lambda: pure.run(f"result = store.is_exist({kept[0]!r})") == 1, 30)
        assert removed_stay_gone(pure, gone)
        assert digests(pure, kept) == {k: want[k] for k in kept}
        # The refused copies were deleted from the node's disk, not just hidden.
        assert node.metric("mooncake_disk_stale_copies_total") >= 6
        assert node.metric("mooncake_disk_objects") == pytest.approx(
            len([k for k in want if k not in gone]), abs=len(want) - len(only))
    finally:
        node.stop()


def test_ranged_reads_of_disk_only_objects(make_master, make_worker, tmp_path):
    master = make_master(*OFFLOAD)
    node = disk_node(master, str(tmp_path / "tier"))
    pure = make_worker()
    pure.setup(master, segment=0)
    try:
        n = 64
        pure.run("import os\n"
                 "ns['vals'] = {}\n"
                 f"for i in range({n}):\n"
                 "    k = 'rg' + str(i); v = os.urandom(" + str(MIB) + ")\n"
                 "    assert store.put(k, v) == 0\n"
                 "    ns['vals'][k] = v\n"
                 "result = 0")
        assert wait_for(lambda: node.metric("mooncake_disk_offloads_total") >= n, 30)
        only = disk_only(pure, [f"rg{i}" for i in range(n)])
        assert len(only) >= 4, only
        a, b = only[0], only[1]
        reads = node.metric("mooncake_disk_reads_total")
        got = pure.run(
            f"buf = ctypes.create_string_buffer({MIB}); p = ctypes.addressof(buf)\n"
            f"assert store.register_buffer(p, {MIB}) == 0\n"
            f"res = store.get_into_ranges([p], [[{a!r}, {b!r}]], [[[0, 5000], [10000]]], "
            f"[[[123, {MIB} - 4096], [65536 * 3 + 7]]], [[[4000, 4096], [70000]]])\n"
            f"v = ns['vals']\n"
            f"same = [ctypes.string_at(p, 4000) == v[{a!r}][123:4123],\n"
            f"        ctypes.string_at(p + 5000, 4096) == v[{a!r}][{MIB} - 4096:],\n"
            f"        ctypes.string_at(p + 10000, 70000) == v[{b!r}][196615:266615]]\n"
            f"oob = store.get_into_ranges([p], [[{a!r}]], [[[0, 0, 0]]], "
            f"[[[{MIB} - 10, {MIB}, 0]]], [[[11, 1, 0]]])\n"
            f"past_buf = store.get_into_ranges([p], [[{a!r}]], [[[{MIB} - 10]]], [[[0]]], "
            f"[[[11]]])\n"
            f"missing = store.get_into_ranges([p], [['no-such-key']], [[[0]]], [[[0]]], [[[8]]])\n"
            f"multi = store.batch_get_into_multi_buffer_ranges([{b!r}], [[p, p + 100]], "
            f"[[100, 200]], [[0, {MIB} - 200]])\n"
            f"multi_ok = ctypes.string_at(p, 300) == v[{b!r}][:100] + v[{b!r}][{MIB} - 200:]\n"
            f"store.unregister_buffer(p)\n"
            f"result = [res, same, oob, past_buf, missing, multi, multi_ok]")
        res, same, oob, past_buf, missing, multi, multi_ok = got
        assert res == [[[4000, 4096], [70000]]]
        assert same == [True, True, True]
        assert oob == [[[INVALID_PARAMS, INVALID_PARAMS, INVALID_PARAMS]]]
        assert past_buf == [[[INVALID_PARAMS]]]
        assert missing == [[[OBJECT_NOT_FOUND]]]
        assert multi == [300] and multi_ok
        # Served by the node's disk (one read per key and call, not per range).
        assert node.metric("mooncake_disk_reads_total") >= reads + 3
        # The node's disk copy gone (its node stopped): a ranged read says so, cleanly.
        node.stop()
        assert wait_for(lambda: pure.run(f"result = store.is_exist({a!r})") == 0, 15)
        assert pure.run(
            f"buf = ctypes.create_string_buffer(64); p = ctypes.addressof(buf)\n"
            f"assert store.register_buffer(p, 64) == 0\n"
            f"r = store.get_into_ranges([p], [[{a!r}]], [[[0]]], [[[0]]], [[[8]]])\n"
            f"store.unregister_buffer(p)\n"
            f"result = r") == [[[OBJECT_NOT_FOUND]]]
    finally:
        node.stop()


@pytest.mark.skipif(not etcd_binary(), reason="needs etcd (Debian: etcd-server)")
def test_ha_failover_keeps_disk_copies_and_removals(monkeypatch, tmp_path):
    root = str(tmp_path / "tier")
    cid = f"dm-{uuid.uuid4().hex[:8]}"
    etcd = EtcdCluster(1)
    masters, workers, node = [], [], None
    try:
        masters = [HaMaster(etcd.endpoints, cid, "--enable_offload", "--client_ttl=3")
                   for _ in range(2)]
        assert wait_for(lambda: sum(m.leading for m in masters) == 1, timeout=20)
        monkeypatch.setenv("MC_STORE_CLUSTER_ID", cid)
        node = disk_node(HaAddress(etcd), root)
        pure = Worker(env={"MC_STORE_CLUSTER_ID": cid})
        workers.append(pure)
        pure.setup(HaAddress(etcd), segment=0)
        n = 48
        want = put_many(pure, "h", n)
        assert wait_for(lambda: node.metric("mooncake_disk_offloads_total") >= n, 30)
        only = disk_only(pure, want)
        assert len(only) >= n - 32, only
        # The node goes down, some objects are removed, the leader dies, the node comes back
        # to the new leader: the removed ones stay gone, the rest read back.
        node.stop()
        gone = only[:5]
        assert pure.run(f"result = [store.remove(k) for k in {gone!r}]") == [0] * len(gone)
        (old,) = [m for m in masters if m.leading]
        old.kill()
        (new,) = [m for m in masters if m is not old]
        assert wait_for(lambda: new.leading, 30), new.output()[-2000:]
        node = disk_node(HaAddress(etcd), root)
        kept = [k for k in only if k not in gone]
        assert wait_for(lambda: pure.run(f"result = store.is_exist({kept[0]!r})") == 1, 30)
        assert removed_stay_gone(pure, gone)
        assert digests(pure, kept) == {k: want[k] for k in kept}
        assert node.metric("mooncake_disk_stale_copies_total") >= len(gone)
    finally:
        if node:
            node.stop()
        for w in workers:
            w.close()
        for m in masters:
            m.stop()
        etcd.stop()
