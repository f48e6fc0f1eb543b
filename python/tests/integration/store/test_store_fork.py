"""A store across fork() (issue 32): a dummy store and a direct one set up in one process, which
then forks; parent and child both use the handle at once. The child's copy shares the parent's
connections, request counters and shared memory, so every call in the child must fail at once
with UNAVAILABLE_IN_CURRENT_STATUS (-1010) and touch none of them; the parent keeps every byte
right during the child's attempts and after the child dropped its copy and exited; a store the
child sets up itself works. The same through multiprocessing's fork Pool. fork_probe.py runs each
case in a process of its own (the test process never forks)."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from node_helpers import Node

PROBE = Path(__file__).with_name("fork_probe.py")
UNAVAILABLE = -1010


@pytest.fixture
def node(make_master):
    master = make_master("--client_ttl=5")
    n = Node(master, segment="256mb")
    yield master, n
    n.stop(signal.SIGKILL)


def probe(*args, timeout=240):
    p = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, f"probe {args} failed ({p.returncode}):\n{p.stderr[-4000:]}"
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out, p.stderr


def assert_exact(r, what):
    """Every put succeeded and every read returned this process's own bytes."""
    assert r["put_codes"] == {"0": r["ops"] // 2}, f"{what}: put codes {r}"
    assert r["wrong"] == 0 and r["empty_gets"] == 0, f"{what}: bad reads {r}"


def assert_refused(r, what):
    """Every call failed with -1010, and no read returned bytes."""
    assert r["put_codes"] == {str(UNAVAILABLE): r["ops"] // 2}, f"{what}: put codes {r}"
    assert r["wrong"] == 0 and r["empty_gets"] == r["ops"] // 2, f"{what}: reads {r}"


def check_fork(out, stderr):
    print(json.dumps(out))
    child = out["child"]
    assert out["child_exit"] == 0, f"the child did not exit cleanly: {out}"
    assert child and "error" not in child, f"child: {child}"
    # the parent: byte-exact while the child tried, after it dropped its copy and exited
    assert_exact(out["during"], "parent during the child's calls")
    assert_exact(out["after"], "parent after the child exited")
    assert out["pre_intact"] is True
    assert out["close"] == 0
    # the child: refused at once, every call, with the clear error logged
    assert_refused(child["rounds"], "child")
    calls = child["other_calls"]
    assert calls["get_size"] == UNAVAILABLE
    assert calls["is_exist"] == -1  # every error reads -1 there, as in the reference
    assert calls["remove"] == UNAVAILABLE and calls["setup_again"] == UNAVAILABLE
    assert calls["health_check"] == 1  # as for a store that is not set up
    assert child["rounds"]["secs"] < 10 and child["other_secs"] < 5, child
    assert child["release_secs"] < 5, child
    assert "a fork() child" in stderr
    # a store the child sets up itself works
    assert_exact(child["own_rounds"], "the child's own store")
    assert child["own_close"] == 0


def test_dummy_store_across_fork(node):
    _, n = node
    check_fork(*probe("fork", "dummy", n.addr))


def test_direct_store_across_fork(node):
    master, _ = node
    check_fork(*probe("fork", "direct", master.addr))


@pytest.mark.parametrize("kind", ["dummy", "direct"])
def test_store_in_fork_pool(node, kind):
    master, n = node
    out, _ = probe("pool", kind, n.addr if kind == "dummy" else master.addr)
    print(json.dumps(out))
    for w in out["inherited"]:
        assert w["put"] == UNAVAILABLE and w["get_empty"] is True, out["inherited"]
    for r in out["own"]:
        assert_exact(r, "a worker's own store")
        assert r["close"] == 0
    assert_exact(out["after"], "parent after the pool")
    assert out["pre_intact"] is True and out["close"] == 0
