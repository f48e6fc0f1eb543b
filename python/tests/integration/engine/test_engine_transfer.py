"""Two processes on loopback move data with READ and WRITE over tcp, shm and fabric (libfabric's
tcp provider), through P2PHANDSHAKE and the HTTP metadata server; every byte is checked by SHA-256
computed where it landed."""

import time
from pathlib import Path

import pytest

from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode
from te_helpers import LocalBuffer, Peer, fabric_env, libfabric_installed, pattern, peer_host

KiB, MiB = 1 << 10, 1 << 20
PEER_SIZE = 80 * MiB
# Mixed sizes for batches: tiny, odd, page-sized, not a power of two, a few MiB.
MIXED = [1, 17, 4 * KiB, 64 * KiB + 3, MiB, 3 * MiB + 5]

COMBOS = [("tcp", "p2p"), ("tcp", "http"), ("shm", "p2p"), ("shm", "http"), ("fabric", "p2p"),
          ("fabric", "http")]


class Pair:
    def __init__(self, protocol, engine, peer, local):
        self.protocol, self.engine, self.peer, self.local = protocol, engine, peer, local
        self.seed = 1000

    def next_seed(self) -> int:
        self.seed += 1
        return self.seed


@pytest.fixture(scope="module", params=COMBOS, ids=["-".join(c) for c in COMBOS])
def pair(request, tmp_path_factory):
    protocol, meta_kind = request.param
    if protocol == "fabric" and not libfabric_installed():
        pytest.skip("libfabric.so.1 is not installed (Debian: libfabric1)")
    metadata = (request.getfixturevalue("metadata_url") if meta_kind == "http"
                else "P2PHANDSHAKE")
    tmp = tmp_path_factory.mktemp(f"pair-{protocol}-{meta_kind}")
    env = fabric_env()
    if protocol == "fabric":
        env.__enter__()
    peer = engine = local = None
    try:
        peer = Peer(Path(tmp), protocol, metadata, PEER_SIZE, peer_host(metadata))
        engine = TransferEngine()
        assert engine.initialize(peer_host(metadata), metadata, protocol, "") == 0
        # Plain registered memory over tcp and fabric, engine-managed memory over shm: both kinds
        # covered.
        local = LocalBuffer(engine, PEER_SIZE, managed=(protocol == "shm"))
        yield Pair(protocol, engine, peer, local)
        if protocol == "fabric":  # the fabric transport carried them, not a silent tcp
            stats = engine.get_transport_stats()
            assert stats["fabric"][0] > 0 and stats["tcp"][0] == 0, stats
    finally:
        if local:
            local.release()
        if engine:
            engine.close()
        if peer:
            peer.close()
        if protocol == "fabric":
            env.__exit__()


@pytest.mark.parametrize("size", [KiB, MiB, 64 * MiB], ids=["1KiB", "1MiB", "64MiB"])
def test_write_then_read_back(pair, size):
    off = 4096 + 7  # not aligned, not at the start of the buffer
    want = pair.local.put(0, pattern(pair.next_seed(), size))
    rc = pair.engine.transfer_sync_write(pair.peer.name, pair.local.addr, pair.peer.addr + off, size)
    assert rc == 0
    assert pair.peer.sha(off, size) == want


@pytest.mark.parametrize("size", [KiB, MiB, 64 * MiB], ids=["1KiB", "1MiB", "64MiB"])
def test_read(pair, size):
    off = 3 * MiB + 1
    want = pair.peer.fill(off, size, pair.next_seed())
    pair.local.put(0, bytes(16))  # make sure the local buffer does not already hold the data
    rc = pair.engine.transfer_sync_read(pair.peer.name, pair.local.addr, pair.peer.addr + off, size)
    assert rc == 0
    assert pair.local.sha(0, size) == want


def _layout(sizes, gap=13):
    offs, at = [], 0
    for s in sizes:
        offs.append(at)
        at += s + gap
    return offs


def test_batch_mixed_sizes_write_and_read(pair):
    e, peer, local = pair.engine, pair.peer, pair.local
    offs = _layout(MIXED)
    want = [local.put(o, pattern(pair.next_seed(), s)) for o, s in zip(offs, MIXED)]
    rc = e.batch_transfer_sync_write(peer.name, [local.addr + o for o in offs],
                                     [peer.addr + o for o in offs], MIXED)
    assert rc == 0
    assert [peer.sha(o, s) for o, s in zip(offs, MIXED)] == want

    # Read them back into a different local region, through the opcode-taking variant.
    base = 20 * MiB
    want = [peer.fill(o, s, pair.next_seed()) for o, s in zip(offs, MIXED)]
    rc = e.batch_transfer_sync(peer.name, [local.addr + base + o for o in offs],
                               [peer.addr + o for o in offs], MIXED, TransferOpcode.Read)
    assert rc == 0
    assert [local.sha(base + o, s) for o, s in zip(offs, MIXED)] == want


def test_async_batches_and_status(pair):
    e, peer, local = pair.engine, pair.peer, pair.local
    offs = _layout(MIXED)
    wsha = [local.put(o, pattern(pair.next_seed(), s)) for o, s in zip(offs, MIXED)]
    rbase = 40 * MiB  # the read batch uses other peer and local regions than the write batch
    rsha = [peer.fill(rbase + o, s, pair.next_seed()) for o, s in zip(offs, MIXED)]

    wid = e.batch_transfer_async_write(peer.name, [local.addr + o for o in offs],
                                       [peer.addr + o for o in offs], MIXED)
    rid = e.batch_transfer_async_read(peer.name, [local.addr + rbase + o for o in offs],
                                      [peer.addr + rbase + o for o in offs], MIXED)
    assert wid != 0 and rid != 0 and wid != rid
    assert e.get_batch_transfer_status([wid, rid]) == 0
    assert [peer.sha(o, s) for o, s in zip(offs, MIXED)] == wsha
    assert [local.sha(rbase + o, s) for o, s in zip(offs, MIXED)] == rsha
    # The ids were spent by get_batch_transfer_status.
    assert e.get_batch_transfer_status([wid]) == -1

    oid = e.batch_transfer_async(peer.name, [local.addr], [peer.addr + 60 * MiB], [MiB],
                                 TransferOpcode.Write)
    assert oid != 0
    assert e.get_batch_transfer_status([oid]) == 0
    assert peer.sha(60 * MiB, MiB) == local.sha(0, MiB)


def test_submit_write_and_check_status(pair):
    e, peer, local = pair.engine, pair.peer, pair.local
    size = 8 * MiB
    want = local.put(0, pattern(pair.next_seed(), size))
    bid = e.transfer_submit_write(peer.name, local.addr, peer.addr + MiB, size)
    assert bid > 0
    deadline = time.monotonic() + 20
    status = 0
    while status == 0 and time.monotonic() < deadline:
        status = e.transfer_check_status(bid)
        if status == 0:
            time.sleep(0.001)
    assert status == 1
    assert peer.sha(MiB, size) == want
    # A finished id is spent.
    assert e.transfer_check_status(bid) == -1


def test_notifies_both_ways(pair):
    e, peer = pair.engine, pair.peer
    assert e.send_notify(peer.name, TransferNotify("plain", "hello")) == 0
    data = pattern(pair.next_seed(), 64)
    want = pair.local.put(0, data)
    rc = e.transfer_sync(peer.name, pair.local.addr, pair.peer.addr, 64, TransferOpcode.Write,
                         notify=TransferNotify("done", b"\xff\x00binary"))
    assert rc == 0
    assert peer.sha(0, 64) == want
    got = eval_notifies(peer.cmd("NOTIFIES"))
    assert got == [("plain", b"hello"), ("done", b"\xff\x00binary")]
    assert eval_notifies(peer.cmd("NOTIFIES")) == []  # drained

    me = e.get_local_segment_name()
    assert peer.cmd("SENDNOTIFY", me, "back", b"text reply".hex()) == "0"
    assert peer.cmd("SENDNOTIFY", me, "bin", b"\x80\x81".hex()) == "0"
    deadline = time.monotonic() + 10
    notes = []
    while len(notes) < 2 and time.monotonic() < deadline:
        notes += e.get_notifies()
        time.sleep(0.01)
    assert [(n.name, n.msg) for n in notes] == [("back", "text reply"), ("bin", b"\x80\x81")]
    assert all(isinstance(n, TransferNotify) for n in notes)


def eval_notifies(text):
    import json

    return [(name, bytes.fromhex(msg)) for name, msg in json.loads(text)]


def test_first_buffer_address(pair):
    assert pair.engine.get_first_buffer_address(pair.peer.name) == pair.peer.addr


def test_unregistered_peer_memory_is_refused_and_untouched(pair):
    e, peer, local = pair.engine, pair.peer, pair.local
    raw_addr, raw_sha = peer.cmd("RAWBUF", 4096, pair.next_seed()).split()
    raw_addr = int(raw_addr)
    local.put(0, pattern(pair.next_seed(), 4096))
    assert e.transfer_sync_write(peer.name, local.addr, raw_addr, 4096) < 0
    assert e.transfer_sync_read(peer.name, local.addr, raw_addr, 4096) < 0
    assert peer.cmd("SHAADDR", raw_addr, 4096) == raw_sha

    # Straddling the end of the registered buffer: refused as a whole, nothing written.
    tail_before = peer.sha(PEER_SIZE - 100, 100)
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr + PEER_SIZE - 100, 200) < 0
    assert peer.sha(PEER_SIZE - 100, 100) == tail_before

    # One bad request fails its batch; the good one next to it may run, the bad one never does.
    rc = e.batch_transfer_sync_write(peer.name, [local.addr, local.addr],
                                     [peer.addr, raw_addr], [4096, 4096])
    assert rc < 0
    assert peer.cmd("SHAADDR", raw_addr, 4096) == raw_sha

    # And the engine still works afterwards.
    want = local.put(0, pattern(pair.next_seed(), 4096))
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 4096) == 0
    assert peer.sha(0, 4096) == want


def test_bad_lengths_and_local_source(pair):
    e, peer, local = pair.engine, pair.peer, pair.local
    before = peer.sha(0, 4096)
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 0) < 0
    assert e.transfer_sync_write(peer.name, local.addr, peer.addr, 1 << 62) < 0
    # A local source the engine never registered.
    scratch = bytearray(4096)
    import ctypes

    unreg = ctypes.addressof((ctypes.c_char * 4096).from_buffer(scratch))
    assert e.transfer_sync_write(peer.name, unreg, peer.addr, 4096) < 0
    assert peer.sha(0, 4096) == before


def test_shm_maps_the_peer_buffer_and_tcp_does_not(pair):
    """Over shm the initiator must have mapped the peer's buffer (not silently used tcp): the
    engine names its shareable memory memfd:mooncake-buffer, so this process maps two buffers of
    PEER_SIZE, its own and the peer's. Over tcp (plain local memory) it maps none."""
    sizes = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if "memfd:mooncake-buffer" in line:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            sizes.append(hi - lo)
    assert sizes.count(PEER_SIZE) == (2 if pair.protocol == "shm" else 0), sizes


def test_threads_share_one_engine(pair):
    import threading

    e, peer, local = pair.engine, pair.peer, pair.local
    n, size = 4, 2 * MiB
    wants = [local.put(i * size, pattern(pair.next_seed(), size)) for i in range(n)]
    results = [None] * n

    def run(i):
        results[i] = e.transfer_sync_write(peer.name, local.addr + i * size,
                                           peer.addr + i * size, size)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == [0] * n
    assert [peer.sha(i * size, size) for i in range(n)] == wants


def test_http_metadata_port_zero_names_each_process(metadata_url, spawn_peer, make_engine):
    # Two processes both asking for "127.0.0.1:0" with a metadata server: each is named after
    # the port it bound, so they do not overwrite each other's descriptor.
    peers = [spawn_peer("tcp", metadata_url, 1 << 20, "127.0.0.1:0") for _ in range(2)]
    names = [p.name for p in peers]
    assert len(set(names)) == 2, names
    for n in names:
        host, port = n.rsplit(":", 1)
        assert host == "127.0.0.1" and 0 < int(port) < 65536, n
    eng = make_engine("tcp", metadata_url, "127.0.0.1:0")
    me = eng.get_local_segment_name()
    assert me == f"127.0.0.1:{eng.get_rpc_port()}"
    buf = LocalBuffer(eng, 1 << 20, managed=False)
    for i, p in enumerate(peers):
        want = buf.put(0, pattern(60 + i, 1 << 20))
        assert eng.transfer_sync_write(p.name, buf.addr, p.addr, 1 << 20) == 0
        assert p.sha(0, 1 << 20) == want
    assert eng.get_transport_stats()["tcp"][0] == 2
    buf.release()
