"""Master high availability on a real 3-member etcd cluster with three real HA masters, storage
clients and readers (each a process, etcd:// as their master address):

- kill -9 the leader: another master takes over, every acknowledged object reads back by
  checksum, removed ones stay gone, upserted ones hold the new value, new puts succeed;
- kill the leader during a put storm: every put that returned 0 reads back;
- SIGSTOP the leader past its lease: another leads; resumed, the old one serves nothing and
  goes back to standby, and nothing it was asked meanwhile is acknowledged unrecorded;
- kill the etcd cluster's leader: puts go on, nothing acknowledged is lost;
- bad configuration and addresses fail clearly.
(A master without HA restarting from its local log: test_master_restore.py.)"""

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from ha_helpers import HaAddress, HaMaster, current_leader
from node_helpers import Node, dummy_setup
from store_helpers import Worker, binary_path, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from etcd_helpers import EtcdCluster, etcd_binary  # noqa: E402

pytestmark = pytest.mark.skipif(not etcd_binary(), reason="needs etcd (Debian: etcd-server)")


@pytest.fixture(scope="module")
def etcd():
    e = EtcdCluster(3)
    yield e
    e.stop()


@pytest.fixture
def cluster(etcd):
    """A fresh cluster id with three HA masters; (id, masters, workers list to close)."""
    cid = f"ha-{uuid.uuid4().hex[:8]}"
    masters = [HaMaster(etcd.endpoints, cid) for _ in range(3)]
    workers = []
    try:
        assert wait_for(lambda: sum(m.leading for m in masters) == 1, timeout=20)
        yield cid, masters, workers
    finally:
        for w in workers:
            w.close()
        for m in masters:
            m.stop()


def _worker(etcd, cid, workers, segment=32 << 20):
    w = Worker(env={"MC_STORE_CLUSTER_ID": cid})
    workers.append(w)
    w.setup(HaAddress(etcd), segment=segment)
    return w


def _leader(masters):
    (m,) = [m for m in masters if m.leading]
    return m


def _wait_new_leader(etcd, cid, masters, old, timeout=30):
    """Waits until another master leads and the view names it; returns it."""
    def ok():
        now = [m for m in masters if m is not old and m.leading]
        return len(now) == 1 and current_leader(etcd, cid) == now[0].addr
    assert wait_for(ok, timeout=timeout), "no new leader:\n" + "\n".join(
        m.output()[-2000:] for m in masters)
    return _leader([m for m in masters if m is not old])


def _digests(w, keys):
    return w.run("result = {k: sha(store.get(k)) for k in " + repr(keys) + "}")


def test_kill_the_leader_loses_nothing_acknowledged(etcd, cluster):
    cid, masters, workers = cluster
    nodes = [_worker(etcd, cid, workers) for _ in range(2)]
    keys = [f"k{i}" for i in range(60)]
    nodes[0].run("cfg = ReplicateConfig(); cfg.replica_num = 2\n"
                 f"for i, k in enumerate({keys!r}):\n"
                 "    assert store.put(k, pattern(4096 + 1531 * i, k), cfg if i % 4 == 0 else None)"
                 " == 0, k\n"
                 "for k in " + repr(keys[:10]) + ":\n"
                 "    assert store.remove(k, True) == 0\n"
                 "for k in " + repr(keys[10:15]) + ":\n"
                 "    assert store.upsert(k, pattern(9000, 'new' + k)) == 0\n"
                 "result = 0")
    before = _digests(nodes[1], keys[10:])
    old = _leader(masters)
    t0 = time.monotonic()
    old.proc.kill()
    new = _wait_new_leader(etcd, cid, masters, old)
    failover = time.monotonic() - t0
    reader = _worker(etcd, cid, workers, segment=0)
    for w in nodes + [reader]:
        assert _digests(w, keys[10:]) == before
        assert w.run(f"result = [store.is_exist(k) for k in {keys[:10]!r}]") == [0] * 10
    assert before["k11"] == nodes[0].run("result = sha(pattern(9000, 'newk11'))")
    # New puts succeed and land beside the restored objects without touching them.
    assert nodes[1].run("result = [store.put(f'after{i}', pattern(65536, i)) for i in range(40)]") \
        == [0] * 40
    assert reader.run("result = all(sha(store.get(f'after{i}')) == sha(pattern(65536, i)) "
                      "for i in range(40))")
    assert _digests(reader, keys[10:]) == before
    assert new.addr != old.addr and failover < 20


STORM = ("import time\n"
         "ns['acked'], ns['failed'], ns['stop'] = {}, 0, threading.Event()\n"
         "def storm(t):\n"
         "    i = 0\n"
         "    while not ns['stop'].is_set():\n"
         "        k = f's{os.getpid()}-{t}-{i}'\n"
         "        v = pattern(16384 + 97 * (i % 50), k)\n"
         "        if store.put(k, v) == 0:\n"
         "            ns['acked'][k] = (sha(v), time.monotonic())\n"
         "        else:\n"
         "            ns['failed'] += 1\n"
         "        i += 1\n"
         "ns['threads'] = [threading.Thread(target=storm, args=(t,)) for t in range(3)]\n"
         "for th in ns['threads']: th.start()\n"
         "result = 0")


def test_kill_the_leader_during_a_put_storm(etcd, cluster):
    """Two client processes (several commits in flight at the master at once), three threads
    each, put as fast as they can while the leader is killed."""
    cid, masters, workers = cluster
    storms = [_worker(etcd, cid, workers, segment=64 << 20) for _ in range(2)]
    b = _worker(etcd, cid, workers)
    for w in storms:
        w.run(STORM)
    assert wait_for(lambda: all(w.run("result = len(ns['acked'])") > 50 for w in storms),
                    timeout=20)
    old = _leader(masters)
    killed_at = storms[0].run("import time\nresult = time.monotonic()")
    old.proc.kill()
    _wait_new_leader(etcd, cid, masters, old)
    # the storms go on against the new leader (time.monotonic is one clock for the host)
    for w in storms:
        assert wait_for(lambda: w.run(f"result = sum(t > {killed_at} for _, t in "
                                      "ns['acked'].values())") > 30, timeout=30)
    acked = {}
    for w in storms:
        acked.update(w.run("ns['stop'].set()\n"
                           "for th in ns['threads']: th.join()\n"
                           "result = {k: d for k, (d, _) in ns['acked'].items()}"))
    got = b.run("result = {k: sha(store.get(k)) for k in " + repr(sorted(acked)) + "}")
    missing = [k for k in acked if got[k] != acked[k]]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged puts lost: {missing[:5]}"


def test_a_stopped_leader_is_fenced_out(etcd, cluster):
    cid, masters, workers = cluster
    w = _worker(etcd, cid, workers)
    r = _worker(etcd, cid, workers, segment=16 << 20)
    assert w.run("result = store.put('before', pattern(5000, 'before'))") == 0
    old = _leader(masters)
    old.signal(signal.SIGSTOP)
    # A put sent to the stopped leader waits in its socket; one from another client is sent
    # once the new leader is known, so it goes there.
    w.send("result = store.put('during', pattern(6000, 'during'))")
    new = _wait_new_leader(etcd, cid, masters, old)
    assert r.run("result = store.put('other', pattern(7000, 'other'))") == 0
    old.signal(signal.SIGCONT)
    # Resumed past its lease, the old leader gives its term up and serves nothing more.
    assert wait_for(lambda: not old.leading, timeout=15), old.output()[-3000:]
    assert "deposed" in old.output()
    rc = w.reply()
    if rc == 0:
        # acknowledged: then by the new leader, and it is there
        assert r.run("result = sha(store.get('during')) == sha(pattern(6000, 'during'))")
    else:
        assert rc < 0
    with pytest.raises(OSError):  # the old leader's RPC port is closed
        import socket
        socket.create_connection(("127.0.0.1", old.port), timeout=2).close()
    assert new.leading and current_leader(etcd, cid) == new.addr
    for k, size in (("before", 5000), ("other", 7000)):
        assert r.run(f"result = sha(store.get({k!r})) == sha(pattern({size}, {k!r}))")
    # back as a standby, it can lead again later: kill the new leader
    new.proc.kill()
    assert wait_for(lambda: sum(m.leading for m in masters if m is not new) == 1, timeout=30)
    for k, size in (("before", 5000), ("other", 7000)):
        assert r.run(f"result = sha(store.get({k!r})) == sha(pattern({size}, {k!r}))")


def test_killing_the_etcd_leader_loses_nothing(etcd, cluster):
    cid, masters, workers = cluster
    a, b = _worker(etcd, cid, workers), _worker(etcd, cid, workers)
    assert a.run("result = [store.put(f'e{i}', pattern(8192, i)) for i in range(30)]") == [0] * 30
    victim = etcd.leader()
    assert victim
    etcd.kill(victim)
    try:
        # etcd elects another member within its election timeout; puts resume (a master may
        # have failed over meanwhile: its lease refreshes were refused while etcd had no leader)
        assert wait_for(lambda: a.run("result = store.put('probe', b'p' * 100)") == 0,
                        timeout=30)
        assert wait_for(lambda: sum(m.leading for m in masters) == 1, timeout=30)
        assert a.run("result = [store.put(f'f{i}', pattern(8192, 100 + i)) for i in range(30)]") \
            == [0] * 30
        assert b.run("result = all(sha(store.get(f'e{i}')) == sha(pattern(8192, i)) "
                     "for i in range(30))")
        assert b.run("result = all(sha(store.get(f'f{i}')) == sha(pattern(8192, 100 + i)) "
                     "for i in range(30))")
    finally:
        etcd.start(victim)
        assert wait_for(lambda: etcd.healthy(victim), timeout=30)


def test_a_storage_node_and_its_dummy_clients_follow_the_leader(etcd, cluster, monkeypatch):
    """mooncake_client takes the etcd:// address too: its segment holds the objects a dummy
    client put through it, and after the leader is killed both keep serving them."""
    cid, masters, workers = cluster
    monkeypatch.setenv("MC_STORE_CLUSTER_ID", cid)
    node = Node(HaAddress(etcd), segment="64mb")
    try:
        dummy = Worker(env={"MC_STORE_CLUSTER_ID": cid})
        workers.append(dummy)
        dummy_setup(dummy, node)
        assert dummy.run("result = [store.put(f'd{i}', pattern(32768, i)) for i in range(20)]") \
            == [0] * 20
        old = _leader(masters)
        old.proc.kill()
        _wait_new_leader(etcd, cid, masters, old)
        reader = _worker(etcd, cid, workers, segment=0)
        assert reader.run("result = all(sha(store.get(f'd{i}')) == sha(pattern(32768, i)) "
                          "for i in range(20))")
        assert dummy.run("result = [store.put(f'e{i}', pattern(4096, i)) for i in range(5)]") \
            == [0] * 5
        assert reader.run("result = all(sha(store.get(f'e{i}')) == sha(pattern(4096, i)) "
                          "for i in range(5))")
        assert node.proc.poll() is None
    finally:
        node.stop()


def _refused(*flags):
    p = subprocess.run([binary_path("mooncake_master"), "--metrics_port=0", *flags],
                       capture_output=True, text=True, timeout=15)
    return p.returncode, p.stderr


def test_bad_ha_configuration_is_refused(etcd, tmp_path):
    code, err = _refused("--enable_ha", "--rpc_address=127.0.0.1", "--port=1")
    assert code == 2 and "--etcd_endpoints" in err
    code, err = _refused("--enable_ha", f"--etcd_endpoints={etcd.endpoints}", "--port=5")
    assert code == 2 and "--rpc_address" in err
    code, err = _refused("--enable_ha", f"--etcd_endpoints={etcd.endpoints}",
                         "--rpc_address=127.0.0.1", "--port=0")
    assert code == 2 and "fixed --port" in err
    code, err = _refused("--enable_ha", "--ha_backend_type=redis", "--rpc_address=127.0.0.1",
                         "--port=5", f"--etcd_endpoints={etcd.endpoints}")
    assert code == 2 and "only etcd" in err
    code, err = _refused("--enable_ha", f"--etcd_endpoints={etcd.endpoints}",
                         "--rpc_address=127.0.0.1", "--port=5", f"--metadata_dir={tmp_path}")
    assert code == 2 and "etcd" in err
    code, err = _refused("--enable_ha", "--etcd_endpoints=127.0.0.1:1", "--rpc_address=127.0.0.1",
                         "--port=5")
    assert code == 1 and "cannot join" in err
    code, err = _refused("--enable_ha", "--etcd_endpoints=ftp://x:1", "--rpc_address=127.0.0.1",
                         "--port=5")
    assert code == 1 and "cannot join" in err


def test_client_addresses_that_cannot_work_fail_clearly(etcd):
    w = Worker(env={"MC_STORE_CLUSTER_ID": f"nobody-{uuid.uuid4().hex[:6]}"})
    try:
        # no master was ever elected in this cluster: setup waits out its timeout, then fails
        t0 = time.monotonic()
        rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 16 << 20, 16 << 20, 'tcp',"
                   f" '', {etcd.url!r})")
        assert rc != 0 and time.monotonic() - t0 < 30
        rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 16 << 20, 16 << 20, 'tcp',"
                   " '', 'etcd://not a host')")
        assert rc != 0
        rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 16 << 20, 16 << 20, 'tcp',"
                   " '', 'etcd://')")
        assert rc != 0
    finally:
        w.close()
