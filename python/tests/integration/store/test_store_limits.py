"""Bounded resources: what one misbehaving process can make the master, a storage node's engine
or the metadata service hold, and that honest clients are still served while it tries.

Every request loop here is bounded and aimed at 127.0.0.1 only."""

import json
import re
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from mooncake.cli import binary_path
from store_helpers import rss_mib

FRAME_MAGIC = 0x314B434D
PUT_START = 3


def frame_header(msg_type, request_id, body_len):
    """The common frame header: magic, version, type, flags, request id, body length (LE)."""
    return struct.pack("<IBBHQQ", FRAME_MAGIC, 1, msg_type, 0, request_id, body_len)


def open_idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def test_idle_connections_cannot_lock_clients_out_of_the_master(make_master, make_worker):
    master = make_master()
    socks = open_idle(master.port, 4200)  # more than the master's 4096-connection table
    try:
        time.sleep(0.5)
        node, pure = make_worker(), make_worker()
        node.setup(master, segment=16 << 20)
        pure.setup(master, segment=0)
        assert pure.run("result = store.put('through', b'z' * 10000)") == 0
        assert pure.run("result = store.get('through') == b'z' * 10000") is True
        assert node.run("result = store.health_check()") == 0
    finally:
        close_all(socks)


def test_setup_fails_when_the_master_does_not_answer(make_worker):
    # Something that accepts connections and never answers is not a master: setup must say so
    # (and not return 0 for a client whose every call then fails).
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]
    try:
        w = make_worker()
        rc = w.run("result = store.setup('127.0.0.1', 'P2PHANDSHAKE', 0, 1 << 20, 'tcp', '', "
                   f"'127.0.0.1:{port}')")
        assert rc == -900
    finally:
        lsock.close()


def test_master_memory_for_partial_bodies_is_bounded(make_master, make_worker):
    master = make_master()
    pid = master.proc.pid
    base = rss_mib(pid)
    chunk = b"\0" * (1 << 20)
    socks = []
    try:
        # Eight peers each announce a 64 MiB request and send 60 MiB of it, then stall: without
        # a total bound the master would hold 480 MiB of partial bodies.
        for i in range(8):
            s = socket.create_connection(("127.0.0.1", master.port), timeout=10)
            s.sendall(frame_header(PUT_START, i + 1, 64 << 20))
            for _ in range(60):
                s.sendall(chunk)
            socks.append(s)
        time.sleep(1.0)
        grown = rss_mib(pid) - base
        assert grown < 330, f"the master grew by {grown:.0f} MiB for stalled partial bodies"
        # Honest clients are still served meanwhile.
        w = make_worker()
        w.setup(master, segment=8 << 20)
        assert w.run("result = store.put('ok', b'v' * 1000)") == 0
    finally:
        close_all(socks)


def test_batch_get_larger_than_the_staging_buffer(make_master, make_worker):
    master = make_master()
    node, client = make_worker(), make_worker()
    node.setup(master, segment=64 << 20)
    client.setup(master, segment=0, buffer=4 << 20)
    keys = [f"st-{i}" for i in range(40)]
    assert client.run(f"result = [store.put(k, pattern(128 << 10, k)) for k in {keys!r}]") == \
        [0] * 40
    t0 = time.monotonic()
    ok = client.run(f"bs = store.batch_get_buffer({keys!r})\n"
                    f"result = [b is not None and sha(bytes(b)) == sha(pattern(128 << 10, k)) "
                    f"for b, k in zip(bs, {keys!r})]")
    elapsed = time.monotonic() - t0
    assert ok == [True] * 40
    assert elapsed < 10, f"a 5 MiB batch through 4 MiB of staging took {elapsed:.1f} s"


def test_admin_endpoints_long_keys_and_batches(make_master, make_worker):
    master = make_master()
    node = make_worker()
    node.setup(master, segment=32 << 20)
    long_key = "k" * 4000
    keys = [f"bq-{i:04d}-" + "x" * 40 for i in range(300)]
    assert node.run(f"result = store.put({long_key!r}, b'1')") == 0
    assert node.run(f"result = [store.put(k, b'v') for k in {keys!r}]") == [0] * 300
    one = json.loads(master.http("/json/query_key?key=" + long_key))
    assert one["key"] == long_key and one["size"] == 1
    many = json.loads(master.http("/json/batch_query_keys?keys=" + ",".join(keys)))
    assert sorted(many) == sorted(keys)
    assert all(v.get("size") == 1 for v in many.values())
    segs = json.loads(master.http("/json/get_all_segments"))
    assert segs and all("client_id" not in s for s in segs)  # ids authorize unmounts
    # Bytes that are not UTF-8 in a key come back as valid UTF-8 JSON (\xNN), never raw.
    url = f"http://127.0.0.1:{master.metrics_port}/json/query_key?key=%FF%FEbin"
    status, body = http("GET", url)
    assert status == 404
    assert json.loads(body.decode("utf-8"))["key"] == "\\xff\\xfebin"


@pytest.fixture
def metadata_server():
    proc = subprocess.Popen([binary_path("mooncake_http_metadata_server"), "--host=127.0.0.1",
                             "--port=0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    port = int(re.search(r":(\d+)", line).group(1))
    yield f"http://127.0.0.1:{port}/metadata"
    proc.terminate()
    proc.wait(timeout=10)


def http(method, url, data=None):
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_metadata_store_total_is_bounded(metadata_server):
    key4k = "d" * 4096
    assert http("PUT", f"{metadata_server}?key={key4k}", b"{}")[0] == 200
    assert http("GET", f"{metadata_server}?key={key4k}") == (200, b"{}")
    value = b"v" * (16 << 20)
    codes = [http("PUT", f"{metadata_server}?key=big-{i}", value)[0] for i in range(17)]
    # 256 MiB in all: the store fills, refuses further puts, and keeps serving what it holds
    assert codes[:15] == [200] * 15
    assert 507 in codes
    assert http("GET", f"{metadata_server}?key=big-0")[0] == 200
    assert http("DELETE", f"{metadata_server}?key=big-0")[0] == 200
    assert http("PUT", f"{metadata_server}?key=after", b"x" * 1000)[0] == 200
