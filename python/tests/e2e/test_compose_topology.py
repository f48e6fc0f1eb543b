"""The compose topology (deploy/docker/docker-compose.yml) started here as plain processes, each
service with the command, flags and environment the compose file gives it
(tools/deploy/compose_local.py): 3 etcd members, two masters with HA, two storage nodes. The demo
service's cluster check passes; the standby master answers /health as a standby; after the
leader is killed with SIGKILL the other master leads and the check passes again."""

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "deploy"))
import compose_local  # noqa: E402

COMPOSE = ROOT / "deploy" / "docker" / "docker-compose.yml"


def health(topo, name):
    url = topo.env(name)["MOONCAKE_HEALTH_URL"]
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


def roles(topo):
    return {n: (health(topo, n) or {}).get("role") for n in ("master-1", "master-2")
            if n in topo.procs}


def wait_for(cond, what, deadline_s=60):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    pytest.fail(f"timed out after {deadline_s} s waiting for {what}")


def check_demo(topo):
    res = topo.run("demo", timeout_s=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cluster check finished: all data verified" in res.stdout, res.stdout


@pytest.fixture
def topology(tmp_path):
    topo = compose_local.Topology(COMPOSE, tmp_path)
    try:
        topo.up(skip=("demo",), deadline_s=90)
        yield topo
    finally:
        topo.down()


def test_compose_topology_as_processes(topology):
    topo = topology
    assert set(topo.procs) == {"etcd-1", "etcd-2", "etcd-3", "master-1", "master-2",
                               "node-1", "node-2"}
    # Exactly one leader; the other answers its probe as a standby naming the leader.
    r = wait_for(lambda: (lambda r: r if sorted(r.values()) == ["leader", "standby"] else None)(
        roles(topo)), "one leader and one standby")
    leader = next(n for n, role in r.items() if role == "leader")
    standby = next(n for n, role in r.items() if role == "standby")
    h = health(topo, standby)
    assert h["status"] == "ok" and h["service_ready"] is False
    assert h["leader_address"].endswith(":" + topo.values["MASTER1_PORT" if leader == "master-1"
                                                          else "MASTER2_PORT"])
    check_demo(topo)

    topo.kill(leader)
    wait_for(lambda: roles(topo).get(standby) == "leader", f"{standby} to take over")
    check_demo(topo)
