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


def _mac(ns: str, dev: str) -> str:
    out = ip("-n", ns, "-o", "link", "show", dev).stdout
    return out.split("link/ether", 1)[1].split()[0]


class NetnsStar:
    """A hub namespace joined to each of n leaf namespaces by a veth pair of its own: hub side
    10.20{i}.X.1, leaf side 10.20{i}.X.2 (i = 2, 3, ...). The neighbour entries are permanent on
    both sides, so a leaf whose link is down (blackhole) is silent: the hub's packets to it are
    dropped without an error (no ARP failure, no ICMP), exactly as a host that vanished from the
    network; heal brings it back."""

    def __init__(self, leaves: int):
        tag = f"{os.getpid() % 100000}-{random.getrandbits(16):04x}"
        x = random.randint(1, 254)
        short = f"{random.getrandbits(20):05x}"
        self.ns = {"hub": f"mcst-{tag}-h"}
        self.dev = {}
        self.addr = {}
        self.hub_addr = {}
        for i in range(leaves):
            leaf = f"n{i}"
            self.ns[leaf] = f"mcst-{tag}-{leaf}"
            self.dev[leaf] = (f"mch{short}{i}", f"mcl{short}{i}")  # hub side, leaf side
            self.hub_addr[leaf] = f"10.{202 + i}.{x}.1"
            self.addr[leaf] = f"10.{202 + i}.{x}.2"
        self.created = []

    def setup(self) -> None:
        try:
            r = ip("netns", "add", self.ns["hub"], check=False)
        except FileNotFoundError:
            pytest.fail("the network-namespace tests need iproute2 (`ip`); "
                        "tools/dev/install-deps.sh installs it")
        if r.returncode != 0:
            pytest.fail(f"`ip netns add` is not permitted here ({r.stderr.strip()}); these tests "
                        "need root (CI runs as root), they do not skip")
        self.created.append(self.ns["hub"])
        hub = self.ns["hub"]
        ip("-n", hub, "link", "set", "lo", "up")
        for leaf, (hdev, ldev) in self.dev.items():
            ns = self.ns[leaf]
            ip("netns", "add", ns)
            self.created.append(ns)
            ip("link", "add", hdev, "netns", hub, "type", "veth", "peer", "name", ldev, "netns", ns)
            ip("-n", hub, "addr", "add", f"{self.hub_addr[leaf]}/24", "dev", hdev)
            ip("-n", ns, "addr", "add", f"{self.addr[leaf]}/24", "dev", ldev)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", hub, "link", "set", hdev, "up")
            ip("-n", ns, "link", "set", ldev, "up")
            self._neighbours(leaf)

    def _neighbours(self, leaf: str) -> None:
        hdev, ldev = self.dev[leaf]
        hub, ns = self.ns["hub"], self.ns[leaf]
        ip("-n", hub, "neigh", "replace", self.addr[leaf], "lladdr", _mac(ns, ldev), "dev", hdev,
           "nud", "permanent")
        ip("-n", ns, "neigh", "replace", self.hub_addr[leaf], "lladdr", _mac(hub, hdev), "dev",
           ldev, "nud", "permanent")

    def prefix(self, side: str):
        return ["ip", "netns", "exec", self.ns[side]]

    def blackhole(self, leaf: str) -> None:
        ip("-n", self.ns[leaf], "link", "set", self.dev[leaf][1], "down")

    def heal(self, leaf: str) -> None:
        ip("-n", self.ns[leaf], "link", "set", self.dev[leaf][1], "up")
        self._neighbours(leaf)  # a link going down flushes the leaf's entries

    def teardown(self) -> None:
        for ns in reversed(self.created):
            ip("netns", "del", ns, check=False)
        self.created.clear()


@pytest.fixture
def netns_star():
    """A hub and two leaves (NetnsStar)."""
    star = NetnsStar(2)
    try:
        star.setup()
        yield star
    finally:
        star.teardown()


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
