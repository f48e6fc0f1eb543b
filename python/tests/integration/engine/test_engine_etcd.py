"""Transfer Engines finding each other through a real etcd (``etcd://host:port``): data moves
both ways and is checked by SHA-256 where it landed; a segment's key lives on a lease, so it is
gone after the TTL when its engine is SIGKILLed and at once when the engine closes; bad
connection strings and an unreachable etcd give clear codes without hanging."""

import os
import time
from pathlib import Path

import pytest
from etcd_helpers import Etcd, etcd_binary, free_port
from te_helpers import LocalBuffer, Peer, pattern, sha

from mooncake.engine import TransferEngine

pytestmark = pytest.mark.skipif(not etcd_binary(), reason="needs etcd (Debian: etcd-server)")

ERR_INVALID_ARGUMENT, ERR_METADATA, ERR_NOT_IMPLEMENTED = -1, -200, -303


@pytest.fixture(scope="module")
def etcd():
    e = Etcd()
    yield e
    e.stop()


def _peer(tmp_path, metadata, env=None):
    host = f"127.0.0.1:{free_port()}"
    return Peer(tmp_path, "tcp", metadata, 1 << 20, host, env=env)


def _engine(metadata):
    e = TransferEngine()
    rc = e.initialize(f"127.0.0.1:{free_port()}", metadata, "tcp", "")
    assert rc == 0, f"initialize({metadata!r}) returned {rc}"
    return e


def _wait_gone(etcd, key, seconds):
    deadline = time.monotonic() + seconds
    while etcd.get(key) is not None:
        assert time.monotonic() < deadline, f"{key} still in etcd after {seconds}s"
        time.sleep(0.1)


@pytest.mark.parametrize("form", ["etcd", "semicolon", "bare"])
def test_engines_meet_on_etcd_and_move_data(etcd, tmp_path, form):
    dead = f"127.0.0.1:{free_port()}"
    metadata = {"etcd": etcd.url,
                # the reference's ';' separator, a dead endpoint first: failover
                "semicolon": f"etcd://{dead};{etcd.endpoint}",
                # no scheme: the reference reads it as etcd endpoints
                "bare": etcd.endpoint}[form]
    peer = _peer(tmp_path, metadata)
    eng = _engine(metadata)
    try:
        # both descriptors are under the reference's key layout, each on a lease
        for name in (peer.name, eng.get_local_segment_name()):
            kv = etcd.get(f"mooncake/ram/{name}")
            assert kv is not None and kv["lease"] != 0
            assert b'"rpc_port"' in kv["value"] or kv["value"].startswith(b"{")
        buf = LocalBuffer(eng, 1 << 20, managed=True)
        n = 256 << 10
        want = buf.put(0, pattern(7, n))
        assert eng.transfer_sync_write(peer.name, buf.addr, peer.addr, n) == 0
        assert peer.sha(0, n) == want
        want2 = peer.fill(n, n, 11)
        assert eng.transfer_sync_read(peer.name, buf.addr + n, peer.addr + n, n) == 0
        assert buf.sha(n, n) == want2
        buf.release()
    finally:
        eng.close()
        peer.close()


def test_killed_engine_key_expires_and_clean_close_removes_it(etcd, tmp_path):
    env = {"MC_METADATA_LEASE_TTL": "2"}
    killed = _peer(tmp_path, etcd.url, env)
    closed = _peer(tmp_path, etcd.url, env)
    kkey, ckey = f"mooncake/ram/{killed.name}", f"mooncake/ram/{closed.name}"
    try:
        assert etcd.get(kkey) is not None and etcd.get(ckey) is not None
        # kept alive well past the TTL while the engines run
        time.sleep(3)
        assert etcd.get(kkey) is not None and etcd.get(ckey) is not None
        t0 = time.monotonic()
        closed.close()
        assert etcd.get(ckey) is None  # deleted on the way out, not left to the lease
        killed.kill()
        _wait_gone(etcd, kkey, 6)
        assert time.monotonic() - t0 >= 1.0  # it was the lease, not a delete
        # a peer asking for the dead segment gets the metadata error
        eng = _engine(etcd.url)
        try:
            assert eng.transfer_sync_write(killed.name, 0, 0, 1) != 0
        finally:
            eng.close()
    finally:
        killed.close()
        closed.close()


def test_engine_keeps_name_claimed_against_a_second_engine(etcd, tmp_path):
    host = f"127.0.0.1:{free_port()}"
    a = TransferEngine()
    assert a.initialize(host, etcd.url, "tcp", "") == 0
    try:
        b = TransferEngine()
        assert b.initialize(host, etcd.url, "tcp", "") != 0
    finally:
        a.close()
    assert etcd.get(f"mooncake/ram/{host}") is None


def test_cluster_id_prefix(etcd, tmp_path, monkeypatch):
    monkeypatch.setenv("MC_METADATA_CLUSTER_ID", "blue")
    eng = _engine(etcd.url)
    try:
        assert etcd.get(f"mooncake/blue/ram/{eng.get_local_segment_name()}") is not None
    finally:
        eng.close()


@pytest.mark.parametrize("conn,want", [
    ("etcd://", ERR_INVALID_ARGUMENT),
    ("etcd://,;,", ERR_INVALID_ARGUMENT),
    ("etcd://h:1:2", ERR_INVALID_ARGUMENT),
    ("etcd://127.0.0.1:99999", ERR_INVALID_ARGUMENT),
    ("etcd://127.0.0.1:2379/path", ERR_INVALID_ARGUMENT),
    ("etcd://ftp://127.0.0.1:2379", ERR_INVALID_ARGUMENT),
    ("redis://127.0.0.1:6379", ERR_NOT_IMPLEMENTED),
])
def test_malformed_etcd_strings(conn, want):
    e = TransferEngine()
    t0 = time.monotonic()
    assert e.initialize(f"127.0.0.1:{free_port()}", conn, "tcp", "") == want
    assert time.monotonic() - t0 < 2


def test_unreachable_etcd_fails_fast():
    e = TransferEngine()
    t0 = time.monotonic()
    rc = e.initialize(f"127.0.0.1:{free_port()}",
                      f"etcd://127.0.0.1:{free_port()},127.0.0.1:{free_port()}", "tcp", "")
    assert rc == ERR_METADATA
    assert time.monotonic() - t0 < 5
