"""Two hosts on one machine: Transfer Engine peers in two network namespaces joined by a veth
pair, talking over P2PHANDSHAKE on their real (non-loopback) addresses. With protocol "auto" the
engines must use tcp (the shm hand-off's abstract unix sockets exist per network namespace) and
say nothing about it; a peer whose link goes down mid-transfer fails the call within a bound. The
same over the fabric transport (protocol "fabric", libfabric's tcp provider on the veth)."""

import json
import time

import pytest

from te_helpers import libfabric_installed, pattern, sha

FABRIC = {"MC_FABRIC_PROVIDER": "tcp"}

MiB = 1 << 20
SIZE = 64 * MiB + 4096


def stats(peer) -> dict:
    return json.loads(peer.cmd("STATS"))


def _need_libfabric():
    if not libfabric_installed():
        pytest.skip("libfabric.so.1 is not installed (Debian: libfabric1)")


@pytest.mark.parametrize("protocol", ["auto", "fabric", "rdma"])
def test_both_ways_between_namespaces(netns_pair, spawn_ns_peer, protocol):
    if protocol != "auto":
        _need_libfabric()
    env = FABRIC if protocol != "auto" else None
    carrier = "tcp" if protocol == "auto" else "fabric"
    a = spawn_ns_peer("a", SIZE, env, protocol)
    b = spawn_ns_peer("b", SIZE, env, protocol)
    assert a.name.startswith(netns_pair.addr["a"] + ":"), a.name
    assert b.name.startswith(netns_pair.addr["b"] + ":"), b.name
    seed = 100
    for initiator, target in ((b, a), (a, b)):
        for n in (MiB, 64 * MiB):
            seed += 1
            # WRITE: the target checks what landed in its own memory
            want = initiator.fill(0, n, seed)
            assert initiator.cmd("WRITE", target.name, 0, target.addr + 4096, n) == "0"
            assert target.sha(4096, n) == want
            # READ: the initiator checks what it got
            seed += 1
            want = target.fill(0, n, seed)
            assert initiator.cmd("READ", target.name, 4096, target.addr, n) == "0"
            assert initiator.sha(4096, n) == want
    for p in (a, b):
        s = stats(p)
        # 2 sizes x (WRITE, READ) as initiator, all over tcp (auto) or fabric
        assert s[carrier][0] == 4, s
        assert s[carrier][1] == 2 * (MiB + 64 * MiB), s
        assert s["shm"] == [0, 0], s
        if protocol != "auto":
            assert s["tcp"] == [0, 0], s
        # a clean choice, not a failed shm attempt followed by a fallback
        assert "shm" not in p.stderr(), p.stderr()


@pytest.mark.parametrize("protocol", ["auto", "fabric"])
def test_link_down_mid_transfer_fails_within_bound(netns_pair, spawn_ns_peer, protocol):
    if protocol == "fabric":
        _need_libfabric()
    env = {"MC_TRANSFER_TIMEOUT": "2", **(FABRIC if protocol == "fabric" else {})}
    a = spawn_ns_peer("a", SIZE, env, protocol)
    b = spawn_ns_peer("b", SIZE, env, protocol)
    a.fill(0, 64 * MiB, 7)
    # b writes 64 MiB blocks into a, again and again, until a write fails
    assert b.cmd("LOOP", a.name, 0, a.addr, 64 * MiB, 60) == "started"
    # the link goes down mid-stream: after some writes landed, however slow the machine is
    deadline = time.monotonic() + 45
    while int(b.cmd("LOOPDONE")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    netns_pair.link_down("b")
    t0 = time.monotonic()
    rc, done = (int(w) for w in b.cmd("LOOPWAIT").split())
    elapsed = time.monotonic() - t0
    assert done > 0, "no write completed before the link went down"
    assert rc < 0, f"a write over a downed link returned {rc}"
    # the 2 s transfer deadline plus slack, far from the 60 s the loop would run
    assert elapsed < 6, f"the failing write took {elapsed:.1f}s to return"
    # what did land is intact up to the failing block; a is still serving
    assert a.sha(0, MiB) in (sha(pattern(7, MiB)), b.sha(0, MiB))
