"""Peers started together: get_first_buffer_address waits, inside the initiator's start-up
window (MC_TE_STARTUP_WAIT_MS), for a target that has not yet published its segment or its
buffer (the reference's run_tests.sh starts its initiator without waiting for the target); an
unknown name is still answered (0) at the window's end, and at once past it."""

import threading
import time

from mooncake.engine import TransferEngine
from te_helpers import peer_host


def test_waits_for_late_target_then_unknown_is_bounded(metadata_url, make_engine, monkeypatch):
    monkeypatch.setenv("MC_TE_STARTUP_WAIT_MS", "60000")
    initiator = make_engine(metadata=metadata_url)
    name = peer_host(metadata_url)
    late = {}

    def start_target():  # published 1 s later, its buffer registered after that
        t = TransferEngine()
        assert t.initialize(name, metadata_url, "tcp", "") == 0
        time.sleep(0.5)
        late["engine"], late["addr"] = t, t.allocate_managed_buffer(1 << 20)

    timer = threading.Timer(1.0, start_target)
    timer.start()
    try:
        addr = initiator.get_first_buffer_address(name)
        timer.join()
        assert addr != 0 and addr == late["addr"]
        src = initiator.allocate_managed_buffer(4096)
        assert initiator.write_bytes_to_buffer(src, b"late peer", 9) == 0
        assert initiator.transfer_sync_write(name, src, addr, 9) == 0
        assert late["engine"].read_bytes_from_buffer(addr, 9) == b"late peer"
    finally:
        timer.join()
        if "engine" in late:
            late["engine"].close()


def test_unknown_peer_waits_only_the_window(metadata_url, make_engine, monkeypatch):
    monkeypatch.setenv("MC_TE_STARTUP_WAIT_MS", "1500")
    e = make_engine(metadata=metadata_url)
    t0 = time.monotonic()
    assert e.get_first_buffer_address("127.0.0.1:1") == 0
    assert time.monotonic() - t0 < 30  # bounded by the window (generous for a busy host)
    t1 = time.monotonic()
    assert e.get_first_buffer_address("127.0.0.1:2") == 0  # past the window: no wait
    assert time.monotonic() - t1 < 1.4
    # a transfer to an unknown peer never waits, in or out of the window
    monkeypatch.setenv("MC_TE_STARTUP_WAIT_MS", "60000")
    f = make_engine(metadata=metadata_url)
    src = f.allocate_managed_buffer(4096)
    t2 = time.monotonic()
    assert f.transfer_sync_write("127.0.0.1:3", src, 4096, 8) < 0
    assert time.monotonic() - t2 < 20
