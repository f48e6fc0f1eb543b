"""What peers and callers get wrong: unknown segments, a protocol this host lacks, a peer killed
with SIGKILL in the middle of a transfer, a peer restarted under the same name."""

import os
import signal
import threading
import time

from te_helpers import LocalBuffer, pattern

MiB = 1 << 20


def test_unknown_segment_p2p(make_engine):
    e = make_engine()
    local = LocalBuffer(e, 4096, managed=False)
    # Nobody listens on port 1; the call fails fast with a negative code, not an exception.
    assert e.transfer_sync_write("127.0.0.1:1", local.addr, 4096, 4096) < 0
    assert e.get_first_buffer_address("127.0.0.1:1") == 0
    assert e.batch_transfer_async_write("127.0.0.1:1", [local.addr], [4096], [4096]) == 0
    assert e.transfer_submit_write("127.0.0.1:1", local.addr, 4096, 4096) == 0  # the reference's sentinel
    assert e.transfer_sync_write("not a segment name", local.addr, 4096, 4096) < 0


def test_unknown_segment_http(make_engine, metadata_url, monkeypatch):
    # no start-up wait for a peer that never comes (test_engine_startup_wait.py covers it)
    monkeypatch.setenv("MC_TE_STARTUP_WAIT_MS", "0")
    e = make_engine(metadata=metadata_url)
    local = LocalBuffer(e, 4096, managed=False)
    assert e.transfer_sync_read("127.0.0.1:9", local.addr, 4096, 4096) < 0
    assert e.get_first_buffer_address("no-such-segment") == 0


def test_rdma_falls_back_to_tcp_with_a_warning(make_engine, spawn_peer, capfd):
    peer = spawn_peer(protocol="rdma")
    e = make_engine(protocol="rdma")
    # Exactly one warning line (glog style, "W<date> ...") names the missing protocol.
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "rdma" in ln]
    assert len(lines) == 1 and lines[0].startswith("W"), lines
    local = LocalBuffer(e, MiB, managed=False)
    want = local.put(0, pattern(7, MiB))
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, MiB) == 0
    assert peer.sha(0, MiB) == want
    assert any(ln.startswith("W") and "rdma" in ln for ln in peer.stderr().splitlines())


def test_peer_killed_mid_transfer(make_engine, spawn_peer):
    size = 64 * MiB
    victim = spawn_peer(size=size)
    survivor = spawn_peer(size=MiB)
    e = make_engine()
    local = LocalBuffer(e, size, managed=False)
    local.put(0, pattern(11, size))
    # Connect first, then freeze the peer so the big write is certainly in flight when it dies.
    assert e.transfer_sync_write(victim.name, local.addr, victim.addr, 4096) == 0
    os.kill(victim.proc.pid, signal.SIGSTOP)
    result = []
    t = threading.Thread(
        target=lambda: result.append(
            e.transfer_sync_write(victim.name, local.addr, victim.addr, size)))
    t.start()
    # The GIL is released during the transfer: this thread keeps running Python meanwhile.
    spins, until = 0, time.monotonic() + 0.5
    while time.monotonic() < until:
        spins += 1
    assert spins > 1000 and t.is_alive() and not result
    victim.kill()
    t.join(timeout=20)
    assert not t.is_alive(), "transfer to a killed peer did not end within 20 s"
    assert result and result[0] < 0

    # The engine keeps working with another peer.
    want = local.put(0, pattern(12, MiB))
    assert e.transfer_sync_write(survivor.name, local.addr, survivor.addr, MiB) == 0
    assert survivor.sha(0, MiB) == want

    # Async to the dead peer ends (failed) instead of hanging.
    bid = e.batch_transfer_async_write(victim.name, [local.addr], [victim.addr], [4096])
    if bid != 0:
        assert e.get_batch_transfer_status([bid]) == -1


def test_restarted_peer_with_same_name_is_reachable(make_engine, spawn_peer):
    first = spawn_peer(size=MiB)
    e = make_engine()
    local = LocalBuffer(e, MiB, managed=False)
    want = local.put(0, pattern(21, MiB))
    assert e.transfer_sync_write(first.name, local.addr, first.addr, MiB) == 0
    name = first.name
    first.kill()
    second = spawn_peer(size=2 * MiB, host=name)  # same host:port, new process and addresses
    assert second.name == name
    assert e.get_first_buffer_address(name) == second.addr
    assert e.transfer_sync_write(name, local.addr, second.addr + MiB, MiB) == 0
    assert second.sha(MiB, MiB) == want
