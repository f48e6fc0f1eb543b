"""Fixtures for the Transfer Engine across network namespaces: two "hosts" on this machine, each a
network namespace, joined by a veth pair with private addresses (10.201.X.1 and 10.201.X.2). The
traffic stays between the two namespaces. Needs root and iproute2 (CI runs as root); where
``ip netns add`` is not permitted the tests fail with the reason instead of skipping."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

# the engine tests' peer process and its driver
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from te_helpers import Peer  # noqa: E402


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


class NetnsPair:
    """Two namespaces a and b joined by veth va (10.201.X.1, in a) <-> vb (10.201.X.2, in b)."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}-{random.getrandbits(16):04x}"
        x = random.randint(1, 254)
        self.ns = {"a": f"mcte-{tag}-a", "b": f"mcte-{tag}-b"}
        # interface names are at most 15 characters
        short = f"{random.getrandbits(24):06x}"
        self.dev = {"a": f"mcv{short}a", "b": f"mcv{short}b"}
        self.addr = {"a": f"10.201.{x}.1", "b": f"10.201.{x}.2"}
        self.created = []

    def setup(self) -> None:
        try:
            r = ip("netns", "add", self.ns["a"], check=False)
        except FileNotFoundError:
            pytest.fail("the network-namespace tests need iproute2 (`ip`); "
                        "tools/dev/install-deps.sh installs it")
        if r.returncode != 0:
            pytest.fail(f"`ip netns add` is not permitted here ({r.stderr.strip()}); these tests "
                        "need root (CI runs as root), they do not skip")
        self.created.append(self.ns["a"])
        ip("netns", "add", self.ns["b"])
        self.created.append(self.ns["b"])
        ip("link", "add", self.dev["a"], "netns", self.ns["a"], "type", "veth", "peer", "name",
           self.dev["b"], "netns", self.ns["b"])
        for side in ("a", "b"):
            ns, dev = self.ns[side], self.dev[side]
            ip("-n", ns, "addr", "add", f"{self.addr[side]}/24", "dev", dev)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "link", "set", dev, "up")

    def prefix(self, side: str):
        return ["ip", "netns", "exec", self.ns[side]]

    def link_down(self, side: str) -> None:
        ip("-n", self.ns[side], "link", "set", self.dev[side], "down")

    def teardown(self) -> None:
        # deleting a namespace destroys its end of the veth, and with it the pair
        for ns in reversed(self.created):
            ip("netns", "del", ns, check=False)
        self.created.clear()


@pytest.fixture
def netns_pair():
    pair = NetnsPair()
    try:
        pair.setup()
        yield pair
    finally:
        pair.teardown()


@pytest.fixture
def spawn_ns_peer(tmp_path, netns_pair):
    peers = []

    def spawn(side: str, size: int, env=None, protocol="auto") -> Peer:
        p = Peer(tmp_path, protocol, "P2PHANDSHAKE", size, netns_pair.addr[side],
                 prefix=netns_pair.prefix(side), env=env)
        peers.append(p)
        return p

    yield spawn
    # before the namespaces go (fixture order): peers first
    for p in peers:
        p.close()
