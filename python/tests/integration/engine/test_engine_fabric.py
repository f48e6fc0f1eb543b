"""The fabric transport (libfabric's tcp provider on loopback) from Python: a peer killed
mid-transfer, fabric and tcp-only peers mixed both ways, protocol "rdma" taking the fabric
transport when a provider is up, and a provider that does not exist. Skips only when libfabric is
not installed."""

import json
import os
import signal
import threading
import time

import pytest

from mooncake.engine import TransferEngine
from te_helpers import LocalBuffer, fabric_env, libfabric_installed, pattern

MiB = 1 << 20

pytestmark = pytest.mark.skipif(not libfabric_installed(),
                                reason="libfabric.so.1 is not installed (Debian: libfabric1)")


@pytest.fixture(autouse=True)
def tcp_provider():
    with fabric_env():
        yield


def test_peer_killed_mid_transfer_over_fabric(make_engine, spawn_peer):
    size = 64 * MiB
    victim = spawn_peer(protocol="fabric", size=size)
    survivor = spawn_peer(protocol="fabric", size=MiB)
    e = make_engine(protocol="fabric")
    local = LocalBuffer(e, size, managed=False)
    local.put(0, pattern(31, size))
    assert e.transfer_sync_write(victim.name, local.addr, victim.addr, 4096) == 0
    os.kill(victim.proc.pid, signal.SIGSTOP)  # the big write is certainly in flight when it dies
    result = []
    t = threading.Thread(target=lambda: result.append(
        e.transfer_sync_write(victim.name, local.addr, victim.addr, size)))
    t.start()
    time.sleep(0.3)
    assert t.is_alive() and not result
    victim.kill()
    t.join(timeout=20)
    assert not t.is_alive(), "a transfer to a killed fabric peer did not end within 20 s"
    assert result and result[0] < 0
    # the engine keeps serving its other peer, over fabric
    want = local.put(0, pattern(32, MiB))
    assert e.transfer_sync_write(survivor.name, local.addr, survivor.addr, MiB) == 0
    assert survivor.sha(0, MiB) == want
    assert e.transfer_sync_write(victim.name, local.addr, victim.addr, 4096) < 0
    stats = e.get_transport_stats()
    assert stats["fabric"][0] >= 2 and stats["tcp"][0] == 0, stats


@pytest.mark.parametrize("mine,theirs", [("fabric", "tcp"), ("tcp", "fabric")])
def test_fabric_and_tcp_only_peers_transfer_over_tcp(make_engine, spawn_peer, mine, theirs):
    peer = spawn_peer(protocol=theirs, size=4 * MiB)
    e = make_engine(protocol=mine)
    local = LocalBuffer(e, 4 * MiB, managed=False)
    want = local.put(0, pattern(41, 3 * MiB + 1))
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr + 7, 3 * MiB + 1) == 0
    assert peer.sha(7, 3 * MiB + 1) == want
    want = peer.fill(MiB, MiB, 42)
    assert e.transfer_sync_read(peer.name, local.addr, peer.addr + MiB, MiB) == 0
    assert local.sha(0, MiB) == want
    stats = e.get_transport_stats()
    assert stats["tcp"][0] == 2 and stats["fabric"][0] == 0, stats


def test_rdma_with_a_provider_up_never_uses_tcp(make_engine, spawn_peer):
    """On one host rdma still prefers shm for the peer's managed memory (cheapest first); what
    shm cannot carry goes over fabric, never tcp. (Across hosts rdma is the fabric transport: the
    netns tests.)"""
    peer = spawn_peer(protocol="rdma", size=2 * MiB)
    e = make_engine(protocol="rdma")
    local = LocalBuffer(e, 2 * MiB, managed=False)
    want = local.put(0, pattern(51, 2 * MiB))
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 2 * MiB) == 0
    assert peer.sha(0, 2 * MiB) == want
    stats = e.get_transport_stats()
    assert stats["shm"] == (1, 2 * MiB) and stats["tcp"][0] == 0, stats
    # and the peer, as initiator into our plain memory, goes over fabric
    want = local.put(0, pattern(53, MiB))
    assert peer.cmd("READ", e.get_local_segment_name(), 0, local.addr, MiB) == "0"
    assert peer.sha(0, MiB) == want
    pstats = json.loads(peer.cmd("STATS"))
    assert pstats["fabric"] == [1, MiB] and pstats["tcp"][0] == 0, pstats


def test_unknown_provider_fails_fabric_and_rdma_falls_back(make_engine, spawn_peer, capfd):
    with fabric_env("no-such-provider"):
        e = TransferEngine()
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "fabric", "") != 0
        err = capfd.readouterr().err
        assert "fabric transport cannot start" in err, err
        peer = spawn_peer(protocol="tcp", size=MiB)
        r = make_engine(protocol="rdma")  # one warning, then tcp
        lines = [ln for ln in capfd.readouterr().err.splitlines() if "rdma" in ln]
        assert len(lines) == 1 and lines[0].startswith("W"), lines
        local = LocalBuffer(r, MiB, managed=False)
        want = local.put(0, pattern(61, MiB))
        assert r.transfer_sync_write(peer.name, local.addr, peer.addr, MiB) == 0
        assert peer.sha(0, MiB) == want
