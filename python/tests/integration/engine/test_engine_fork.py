"""A TransferEngine across fork() (issue 32): the child's copy shares the parent's listening
socket, peer connections, worker threads' queues and shared memory, so every call in the child
fails at once with CONTEXT (-202) and touches none of them; the child's close and destroy stop
nothing of the parent's; the parent moves every byte right while the child tries and after it
exited, and still accepts new peers; an engine the child starts itself works. fork_probe.py runs
the engine that forks (the test process never forks)."""

import json
import sys
from pathlib import Path

from te_helpers import LinePeer

PROBE = Path(__file__).with_name("fork_probe.py")
CONTEXT = -202
KiB = 1 << 10
MiB = 1 << 20


def test_engine_across_fork(spawn_peer, tmp_path):
    peer = spawn_peer(size=MiB)
    # a short transfer timeout: a child that did use the parent's connections would stall on
    # them for that long, not for the default 30 s
    probe = LinePeer(tmp_path, [sys.executable, str(PROBE)], "fork-probe",
                     env={"MC_TRANSFER_TIMEOUT": "5"})
    try:
        _, name, buf = probe.ready.split()
        buf = int(buf)
        out = json.loads(probe.send(f"FORK {peer.name} {peer.addr}"))
        print(json.dumps(out))
        child = out["child"]
        assert out["child_exit"] == 0, f"the child did not exit cleanly: {out}"
        assert child and "error" not in child, child
        for phase in ("during", "after"):  # the parent, byte-exact throughout
            r = out[phase]
            assert r["codes"] == {"0": 2 * r["rounds"]} and r["wrong"] == 0, (phase, r)
        r = child["rounds"]  # the child, refused at once on every call
        assert r["codes"] == {str(CONTEXT): 2 * r["rounds"]} and r["wrong"] == 0, r
        assert r["secs"] < 10 and child["other_secs"] < 5 and child["release_secs"] < 5, child
        calls = child["other_calls"]
        assert calls["register_memory"] == CONTEXT and calls["unregister_memory"] == CONTEXT
        assert calls["allocate_managed_buffer"] == 0  # 0: no buffer, as for any failure
        assert calls["get_first_buffer_address"] <= 0
        assert "a fork() child" in probe.stderr()
        r = child["own_rounds"]  # an engine of the child's own works
        assert r["codes"] == {"0": 2 * r["rounds"]} and r["wrong"] == 0, r

        # the parent's server still accepts: the peer opens a new connection to it and writes
        want = peer.fill(512 * KiB, 256 * KiB, 77)
        assert peer.cmd("WRITE", name, 512 * KiB, buf + 512 * KiB, 256 * KiB) == "0"
        line = probe.send(f"SHA {512 * KiB} {256 * KiB}")
        assert line == f"OK {want}", line
    finally:
        probe.close()
