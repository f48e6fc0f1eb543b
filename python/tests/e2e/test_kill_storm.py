"""Kill -9 / failover storms (issue 24, must show): four writer processes put, upsert, remove and
read checksummed values of their own keys while the master is killed -9 and restarted on its
--metadata_dir (or, on a 3-member etcd, the HA leader is killed -9 and the standby takes over)
8 times, with both storage nodes SIGSTOPped around half of the kills (paused before the kill,
resumed about 1 s after the new master serves). At the end every acknowledged object that was
not later removed reads back with its last acknowledged value.

Each writer models each key as the set of values it may hold (ack_helpers.WRITER): an
acknowledged write or remove fixes it, an operation that failed or was cut by the kill adds its
outcome as possible. A key that holds none of its possible values is wrong; an acknowledged
value gone is lost. The test prints acknowledged, lost and wrong counts and asserts that none
was lost and none wrong. Pool use stays under 10 %: nothing ever needs evicting."""

import signal
import time
import uuid

import pytest
from ack_helpers import (check, ha_metric, install_checker, leader_of, pause, resume,
                         start_writer, stop_writer, storm_report, wait_for, wait_new_leader,
                         wait_progress)
from etcd_helpers import EtcdCluster
from ha_helpers import HaAddress, HaMaster, current_leader
from node_helpers import Node
from store_helpers import Master, Worker

LEASE = "--default_kv_lease_ttl=200"
EVICTIONS = "mooncake_master_evictions_total"
KILLS = 8


def _finish(name, writers, reader, extra, t0):
    models, stats = {}, []
    for w in writers:
        m, s = stop_writer(w)
        models.update(m)
        stats.append(s)
    verdicts = check(reader, models, timeout=60)
    return storm_report(name, models, stats, verdicts,
                        extra + f", {time.monotonic() - t0:.0f} s")


def test_storm_local_restart(tmp_path):
    t0 = time.monotonic()
    d = str(tmp_path / "meta")
    master = Master(LEASE, f"--metadata_dir={d}")
    nodes, workers = [], []
    try:
        nodes = [Node(master, segment="128mb") for _ in range(2)]
        writers = [Worker() for _ in range(4)]
        reader = Worker()
        workers += [*writers, reader]
        for w in workers:
            w.setup(master, segment=0)
        install_checker(reader)
        for i, w in enumerate(writers):
            start_writer(w, i, seed=1000 + i)
        stalled, evictions = 0, 0.0  # evictions summed over the master's lives
        for cycle in range(KILLS):
            stalled += not wait_progress(writers, 50)
            paused = cycle % 2 == 0
            if paused:
                pause([n.proc for n in nodes])
            port = master.port
            evictions += master.metric(EVICTIONS)
            master.stop(signal.SIGKILL)
            master = Master(LEASE, f"--metadata_dir={d}", port=port)
            if paused:
                time.sleep(1.0)  # the scenario: nodes resumed about 1 s after the restart
                resume([n.proc for n in nodes])
        stalled += not wait_progress(writers, 50)
        acknowledged, lost, wrong, text = _finish(
            "local restart storm", writers, reader,
            f"; {KILLS} kills -9, {KILLS // 2} with the nodes paused; "
            f"evictions={evictions + master.metric(EVICTIONS):g}; stalled cycles={stalled}", t0)
        assert (lost, wrong) == (0, 0), text
        assert acknowledged > 0, text
        assert stalled == 0, "the writers made no progress after a restart: " + text
    finally:
        for w in workers:
            w.close()
        for n in nodes:
            n.proc.send_signal(signal.SIGCONT)
            n.stop()
        master.stop()


@pytest.fixture(scope="module")
def etcd():
    e = EtcdCluster(3)
    yield e
    e.stop()


def test_storm_ha_failover(etcd):
    """The same with HA: two masters on the etcd cluster; each time the leader is killed -9 the
    standby takes over (after the leader's etcd lease lapses) and the killed one comes back as
    the new standby. Each failover waits out the lease, so fewer operations a cycle."""
    t0 = time.monotonic()
    cid = f"storm-{uuid.uuid4().hex[:8]}"
    env = {"MC_STORE_CLUSTER_ID": cid}
    masters = [HaMaster(etcd.endpoints, cid) for _ in range(2)]
    everyone = list(masters)  # to stop at the end
    nodes, workers = [], []
    try:
        assert wait_for(lambda: leader_of(masters) is not None
                        and current_leader(etcd, cid) == leader_of(masters).addr, timeout=60)
        nodes = [Node(HaAddress(etcd), segment="128mb", env=env) for _ in range(2)]
        writers = [Worker(env=env) for _ in range(4)]
        reader = Worker(env=env)
        workers += [*writers, reader]
        for w in workers:
            w.setup(HaAddress(etcd), segment=0)
        install_checker(reader)
        for i, w in enumerate(writers):
            start_writer(w, i, seed=2000 + i, nslots=16)
        stalled, evictions = 0, 0.0
        for cycle in range(KILLS):
            stalled += not wait_progress(writers, 8)
            paused = cycle % 2 == 0
            if paused:
                pause([n.proc for n in nodes])
            old = leader_of(masters)
            evictions += ha_metric(old, EVICTIONS)
            old.kill()
            new = wait_new_leader(etcd, cid, masters, old)
            if paused:
                time.sleep(1.0)  # the scenario: nodes resumed about 1 s after the failover
                resume([n.proc for n in nodes])
            standby = HaMaster(etcd.endpoints, cid)
            everyone.append(standby)
            masters = [new, standby]
        stalled += not wait_progress(writers, 8)
        acknowledged, lost, wrong, text = _finish(
            "HA failover storm", writers, reader,
            f"; {KILLS} leader kills -9, {KILLS // 2} with the nodes paused; "
            f"evictions={evictions + ha_metric(leader_of(masters), EVICTIONS):g}; "
            f"stalled cycles={stalled}", t0)
        assert (lost, wrong) == (0, 0), text
        assert acknowledged > 0, text
        assert stalled == 0, "the writers made no progress after a failover: " + text
    finally:
        for w in workers:
            w.close()
        for n in nodes:
            n.proc.send_signal(signal.SIGCONT)
            n.stop()
        for m in everyone:
            m.stop()
