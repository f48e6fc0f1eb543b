"""Fixtures for the multi-process Transfer Engine tests: peer processes, an HTTP metadata server
and initiator engines in the test process, all on loopback with ports picked at run time."""

import subprocess

import pytest

from mooncake.engine import TransferEngine
from te_helpers import Peer, peer_host


@pytest.fixture(scope="session")
def metadata_url(tmp_path_factory):
    from mooncake.cli import binary_path

    err = open(tmp_path_factory.mktemp("meta") / "server.err", "wb")
    proc = subprocess.Popen([binary_path("mooncake_http_metadata_server"), "--host=127.0.0.1",
                             "--port=0"], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = proc.stdout.readline()  # "listening on HOST:PORT"
        assert line.startswith("listening on "), f"metadata server did not start: {line!r}"
        port = int(line.rsplit(":", 1)[1])
        yield f"http://127.0.0.1:{port}/metadata"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        err.close()


@pytest.fixture
def spawn_peer(tmp_path):
    peers = []

    def spawn(protocol="tcp", metadata="P2PHANDSHAKE", size=1 << 20, host=None) -> Peer:
        p = Peer(tmp_path, protocol, metadata, size, host or peer_host(metadata))
        peers.append(p)
        return p

    yield spawn
    for p in peers:
        p.close()


@pytest.fixture
def make_engine():
    engines = []

    def make(protocol="tcp", metadata="P2PHANDSHAKE", host=None) -> TransferEngine:
        e = TransferEngine()
        rc = e.initialize(host or peer_host(metadata), metadata, protocol, "")
        assert rc == 0, f"initialize returned {rc}"
        engines.append(e)
        return e

    yield make
    for e in engines:
        e.close()
