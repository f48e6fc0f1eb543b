"""Faults: a storage client killed with SIGKILL, client expiry, a master that is down or restarts,
eviction under memory pressure, leases, and what /metrics says about it all."""

import json
import time

import pytest
from store_helpers import wait_for


def test_replicas_survive_kill_of_one_storage_client(make_master, make_worker):
    master = make_master()
    a, b, reader = make_worker(), make_worker(), make_worker()
    a.setup(master, segment=32 << 20)
    b.setup(master, segment=32 << 20)
    reader.setup(master, segment=0)
    keys = [f"r2-{i}" for i in range(8)]
    digests = reader.run(
        "cfg = ReplicateConfig(replica_num=2); out = []\n"
        f"for k in {keys!r}:\n"
        "    v = pattern(300000, k); assert store.put(k, v, config=cfg) == 0; out.append(sha(v))\n"
        "result = out")
    # Every object has a replica on each storage client.
    for k in keys:
        assert json.dumps(json.loads(master.http(f"/query_key?key={k}"))).count("127.0.0.1:") >= 2
    # A reader keeps reading while the owner of one replica dies.
    reader.run(
        "ns['stop'] = False; ns['bad'] = []; ns['reads'] = 0\n"
        "def loop():\n"
        "    while not ns['stop']:\n"
        f"        for k, d in zip({keys!r}, {digests!r}):\n"
        "            if sha(store.get(k)) != d: ns['bad'].append(k)\n"
        "            ns['reads'] += 1\n"
        "ns['t'] = threading.Thread(target=loop); ns['t'].start()\n"
        "result = 0")
    time.sleep(0.3)
    a.kill()
    time.sleep(1.0)
    r = reader.run("ns['stop'] = True; ns['t'].join(); result = [ns['bad'], ns['reads']]")
    assert r[0] == [], f"reads failed after kill -9: {r[0]}"
    assert r[1] > len(keys)
    # After the kill, every object is still readable, from the survivor.
    assert reader.run(f"result = [sha(store.get(k)) for k in {keys!r}]") == digests
    assert b.run("result = store.health_check()") == 0


@pytest.mark.parametrize("protocol", ["tcp", "auto"])
def test_puts_succeed_around_a_dead_node(make_master, make_worker, protocol):
    # Until client_ttl expires it, a killed node is still mounted: a put placed on it must be
    # placed again elsewhere (and the master told to stop placing there), not fail -800.
    master = make_master("--client_ttl=60")
    dead, live, client = make_worker(), make_worker(), make_worker()
    dead.setup(master, segment=64 << 20, protocol=protocol)
    live.setup(master, segment=64 << 20, protocol=protocol)
    client.setup(master, segment=0, protocol=protocol)
    assert client.run("result = store.put('warm', b'x' * 4096)") == 0
    dead.kill()
    t0 = time.monotonic()
    singles = client.run("result = [store.put(f'one-{i}', pattern(65536, f'one-{i}')) "
                         "for i in range(40)]")
    doubles = client.run("cfg = ReplicateConfig(replica_num=2)\n"
                         "result = [store.put(f'two-{i}', pattern(65536, f'two-{i}'), config=cfg)"
                         " for i in range(20)]")
    batch = client.run("keys = [f'bat-{i}' for i in range(16)]\n"
                       "result = store.put_batch(keys, [pattern(8192, k) for k in keys])")
    elapsed = time.monotonic() - t0
    assert singles == [0] * 40
    assert doubles == [0] * 20
    assert batch == 0
    assert client.run("result = all(sha(store.get(k)) == sha(pattern(65536, k)) for k in "
                      "[f'one-{i}' for i in range(40)] + [f'two-{i}' for i in range(20)])")
    assert client.run("result = all(sha(store.get(f'bat-{i}')) == sha(pattern(8192, f'bat-{i}'))"
                      " for i in range(16))")
    assert master.metric("mooncake_master_segments") == 2  # still mounted: not expired yet
    assert elapsed < 20, f"puts around the dead node took {elapsed:.1f} s"


def test_dead_replica_owner_is_tried_last_and_logged_once(make_master, make_worker, tmp_path):
    # The master still lists the dead owner's replicas until client_ttl: the reader must not pay
    # a failed transfer (and a log line) for every object.
    master = make_master("--client_ttl=30")
    a, b = make_worker(), make_worker()
    log = tmp_path / "reader.log"
    with open(log, "w") as err:
        reader = make_worker(stderr=err)
    dead = a.setup(master, segment=32 << 20)
    b.setup(master, segment=32 << 20)
    reader.setup(master, segment=0)
    keys = [f"d-{i}" for i in range(40)]
    digests = reader.run(
        "cfg = ReplicateConfig(replica_num=2); out = []\n"
        f"for k in {keys!r}:\n"
        "    v = pattern(20000, k); assert store.put(k, v, config=cfg) == 0; out.append(sha(v))\n"
        "result = out")
    a.kill()
    for _ in range(3):
        assert reader.run(f"result = [sha(store.get(k)) for k in {keys!r}]") == digests
    # The master still names the dead segment (so the reads above did face it).
    assert dead in master.http("/get_all_segments")
    lines = [ln for ln in log.read_text().splitlines() if "store:" in ln]
    about_dead = [ln for ln in lines if dead in ln]
    assert len(about_dead) == 1, "\n".join(lines)
    assert len(lines) == 1, "\n".join(lines)


def test_expired_client_segments_are_unmounted(make_master, make_worker):
    # Clients heartbeat every second: a few of those survive a loaded machine's stalls, so only
    # the killed owner is expired.
    master = make_master("--client_ttl=5")
    owner, other = make_worker(), make_worker()
    name = owner.setup(master, segment=16 << 20)
    other_name = other.setup(master, segment=16 << 20)
    cfg = f"ReplicateConfig(preferred_segment={name!r})"
    assert owner.run(f"result = store.put('mine', pattern(1000, 'm'), config={cfg})") == 0
    assert name in master.http("/get_all_segments")
    assert master.metric("mooncake_master_segments") == 2
    owner.kill()  # no unmount, no more heartbeats
    assert wait_for(lambda: master.metric("mooncake_master_segments") == 1, timeout=60)
    assert name not in master.http("/get_all_segments")
    assert other_name in master.http("/get_all_segments")
    assert other.run("result = store.is_exist('mine')") == 0
    assert master.metric("mooncake_master_expired_clients_total") >= 1
    # The survivor heartbeats and stays mounted.
    assert other.run("result = store.health_check()") == 0


def test_master_down_then_restart(make_master, make_worker):
    # No master at all: setup fails with RPC_FAIL, health says unreachable/not set up.
    w = make_worker()
    rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 1 << 20, 1 << 20, 'tcp', '',"
               " '127.0.0.1:1')")
    assert rc == -900
    assert w.run("result = store.health_check()") == 1
    assert w.run("result = store.put('k', b'v')") < 0

    master = make_master("--client_ttl=30")
    a, b = make_worker(), make_worker()
    a.setup(master, segment=16 << 20)
    b.setup(master, segment=0)
    assert b.run("result = store.put('before', b'x' * 1000)") == 0
    port = master.port
    master.stop()
    assert b.run("result = store.health_check()") == 2
    assert b.run("result = store.put('during', b'x')") == -900
    # Same port again: clients reconnect and mount their segments once more.
    master2 = make_master("--client_ttl=30", port=port)
    assert wait_for(lambda: master2.metric("mooncake_master_segments") == 1, timeout=8)
    assert b.run("result = store.health_check()") == 0
    assert b.run("result = store.put('after', pattern(200000, 'after'))") == 0
    assert a.run("result = sha(store.get('after')) == sha(pattern(200000, 'after'))") is True
    # Metadata lives in the master's memory only (as the reference without HA).
    assert a.run("result = store.is_exist('before')") == 0


def test_eviction_lru_and_leases(make_master, make_worker):
    master = make_master("--default_kv_lease_ttl=60000", "--eviction_high_watermark_ratio=0.9",
                         "--eviction_ratio=0.2")
    node = make_worker()
    node.setup(master, segment=8 << 20)
    mib = 1 << 20
    # Six objects; the first one is read (leased for 60 s), then the rest ages in put order.
    for i in range(6):
        assert node.run(f"result = store.put('ev{i}', pattern({mib}, 'ev{i}'))") == 0
        time.sleep(0.02)
    assert node.run("result = len(store.get('ev0'))") == mib
    for i in range(6, 14):
        rc = node.run(f"result = store.put('ev{i}', pattern({mib}, 'ev{i}'))")
        assert rc == 0, f"put ev{i} -> {rc}"
        time.sleep(0.02)
    # Let the master's monitor (every 100 ms) finish the eviction pass the last puts set off, so
    # that what exists now is what the counts below see.
    time.sleep(0.3)
    exist = node.run(f"result = store.batch_is_exist(['ev%d' % i for i in range(14)])")
    assert exist[0] == 1, "a leased object was evicted"
    assert exist[13] == 1, "the newest object is gone"
    assert exist[1] == 0, "the least recently used unleased object survived"
    # Evicted before anything newer: the survivors among 1..12 are a suffix.
    alive = [i for i in range(1, 13) if exist[i]]
    assert alive == list(range(alive[0], 13)) if alive else True
    assert master.metric("mooncake_master_evictions_total") >= 1
    # The leased object cannot be removed, unless forced.
    assert node.run("result = store.remove('ev0')") == -706
    assert node.run("result = store.remove('ev0', force=True)") == 0
    left = int(master.metric("mooncake_master_objects"))
    assert left == sum(exist) - 1, exist
    assert node.run("result = store.remove_all(force=True)") == left
    assert master.metric("mooncake_master_objects") == 0
    # Value larger than any segment: no space even after eviction.
    assert node.run(f"result = store.put('huge', b'x' * {9 * mib})") == -200
    assert node.run("result = store.put('small', b'x')") == 0
    ops = master.http("/metrics")
    assert 'mooncake_master_ops_total{op="PUT_START"}' in ops or "PUT_START" in ops.upper()


def test_metrics_reflect_operations(make_master, make_worker):
    master = make_master()
    w = make_worker()
    w.setup(master, segment=16 << 20)
    before = master.metric("mooncake_master_ops_total")
    assert w.run("result = [store.put('m%d' % i, b'y' * 4096) for i in range(5)]") == [0] * 5
    assert master.metric("mooncake_master_objects") == 5
    assert master.metric("mooncake_master_object_bytes") == 5 * 4096
    assert master.metric("mooncake_master_segments") == 1
    assert master.metric("mooncake_master_capacity_bytes") == 16 << 20
    assert master.metric("mooncake_master_ops_total") >= before + 10  # put start + put end each
    assert w.run("result = store.close()") == 0
    assert master.metric("mooncake_master_segments") == 0
    assert master.metric("mooncake_master_objects") == 0
