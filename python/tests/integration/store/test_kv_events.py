"""The master's KV-event publisher (--enable_kv_events) against a real libzmq peer: pyzmq's SUB
receives the master's batches (topic, big-endian sequence, msgpack payload decoded by the msgpack
package) for objects stored, removed and evicted, with the reference's fields; a DEALER and a REQ
replay missed sequence numbers; a malformed replay request is answered with the end marker and
counted; flags that cannot work are refused at start."""

import subprocess

import msgpack
import pytest
import zmq
from store_helpers import Master, Worker, wait_for

from mooncake.cli import binary_path

SEGMENT = 16 << 20
END_SEQ = b"\xff" * 8
BASE_FIELDS = {"event_id", "timestamp", "event_type", "type", "model_name", "block_size",
               "additional_salt", "lora_name", "tenant_id", "backend_id", "group_id", "medium",
               "dp_rank", "object_key", "seq_hashes", "block_hashes", "base_block_idx"}


class Sub:
    """A pyzmq SUB on the master's PUB port: every message as (seq, batch, raw payload)."""

    def __init__(self, ctx, port):
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.msgs = []

    def drain(self, timeout_ms=200):
        while self.sock.poll(timeout_ms):
            topic, seq, payload = self.sock.recv_multipart()
            assert topic == b""
            assert len(seq) == 8
            self.msgs.append((int.from_bytes(seq, "big"), msgpack.unpackb(payload), payload))
            timeout_ms = 0

    def events(self):
        return [e for _, batch, _ in self.msgs for e in batch[1]]

    def wait_keys(self, kind, keys, timeout=20.0):
        """The latest event of kind for each of keys, once all have come."""
        got = {}

        def seen():
            self.drain(50)
            got.update({e["object_key"]: e for e in self.events()
                        if e["event_type"] == kind and e["object_key"] in keys})
            return got.keys() == set(keys)

        assert wait_for(seen, timeout=timeout), f"missing {kind}: {set(keys) - got.keys()}"
        return got

    def wait_event(self, pred, timeout=20.0):
        found = []

        def seen():
            self.drain(50)
            found[:] = [e for e in self.events() if pred(e)]
            return bool(found)

        assert wait_for(seen, timeout=timeout), "no such event"
        return found


def subscribed(worker, sub):
    """Puts probes until the subscriber sees one (a subscription reaches a PUB some time after
    the connection, as with libzmq); how many were put (keys "1", "2", ...)."""
    puts = 0

    def probe():
        nonlocal puts
        puts += 1
        assert worker.run(f"result = store.put('{puts}', b'x')") == 0
        sub.drain(100)
        return bool(sub.msgs)

    assert wait_for(probe, timeout=20)
    return puts


@pytest.fixture(scope="module")
def pool():
    master = Master("--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_replay_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_backend_id=pool-a", "--eviction_high_watermark_ratio=0.7")
    worker = Worker()
    ctx = zmq.Context()
    try:
        worker.setup(master, segment=SEGMENT)
        sub = Sub(ctx, master.kv_events_port)
        subscribed(worker, sub)
        yield master, worker, sub, ctx
    finally:
        worker.close()
        master.stop()
        ctx.destroy(linger=0)


def test_stored_and_removed_carry_the_reference_fields(pool):
    master, worker, sub, _ = pool
    for key in ("12345", "0xabc", "plain-key"):
        assert worker.run(f"result = store.put({key!r}, b'v' * 1000)") == 0
    assert worker.run("result = store.remove('12345')") == 0
    stored = sub.wait_keys("stored", {"12345", "0xabc", "plain-key"})
    e = stored["12345"]
    assert set(e) == BASE_FIELDS | {"parent_hash", "token_ids", "parent_block_hash"}
    assert e["type"] == "BlockStored"
    assert e["medium"] == "cpu"
    assert e["backend_id"] == "pool-a"
    assert e["tenant_id"] == "default"
    assert e["seq_hashes"] == [12345] and e["block_hashes"] == [12345]
    assert e["base_block_idx"] == 0
    for nil in ("model_name", "block_size", "additional_salt", "lora_name", "dp_rank",
                "group_id", "parent_hash", "token_ids", "parent_block_hash"):
        assert e[nil] is None, nil
    assert stored["0xabc"]["seq_hashes"] == [0xABC]
    # no block hash in the key: the key alone names it (counted as unparsed)
    assert stored["plain-key"]["seq_hashes"] == [] and stored["plain-key"]["block_hashes"] == []
    removed = sub.wait_event(lambda e: e["event_type"] == "removed" and
                             e["object_key"] == "12345")[0]
    assert set(removed) == BASE_FIELDS
    assert removed["type"] == "BlockRemoved" and removed["base_block_idx"] is None
    assert removed["seq_hashes"] == [12345]
    # event ids grow; sequence numbers count messages one by one from 1
    ids = [ev["event_id"] for ev in sub.events()]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    seqs = [s for s, _, _ in sub.msgs]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for _, batch, _ in sub.msgs:
        assert isinstance(batch[0], int) and batch[2] == 0
    assert master.metric("mooncake_master_kv_events_skipped_unparsed_keys_total") >= 1
    assert master.metric("mooncake_master_kv_events_subscribers") == 1
    import json
    status = json.loads(master.http("/kv_events/status"))
    assert status["enabled"] is True and status["subscribers"] == 1
    assert status["published_events"] >= 4 and status["skipped_unparsed_keys"] >= 1
    assert status["last_sequence"] == seqs[-1]


def test_eviction_is_announced_as_removal(pool):
    master, worker, sub, _ = pool
    keys = [str(1000 + i) for i in range(14)]
    for k in keys:  # 14 MiB into a 16 MiB segment, evicted from 70 % on
        assert worker.run(f"result = store.put({k!r}, b'e' * (1 << 20))") == 0
    assert wait_for(lambda: master.metric("mooncake_master_evictions_total") > 0, timeout=30)
    gone = sub.wait_event(lambda e: e["event_type"] == "removed" and e["object_key"] in keys)
    assert all(e["medium"] == "cpu" and e["seq_hashes"] == [int(e["object_key"])] for e in gone)


def test_replay_fills_a_gap(pool):
    master, worker, sub, ctx = pool
    for i in range(5):
        assert worker.run(f"result = store.put('{77000 + i}', b'r')") == 0
    sub.wait_event(lambda e: e["object_key"] == "77004")
    have = {s: raw for s, _, raw in sub.msgs}
    start = max(have) - 3  # as if the last four had been missed
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(f"tcp://127.0.0.1:{master.kv_replay_port}")
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    got = []
    while True:
        assert dealer.poll(20000)
        empty, seq, payload = dealer.recv_multipart()
        assert empty == b""
        if seq == END_SEQ:
            assert payload == b""
            break
        got.append((int.from_bytes(seq, "big"), payload))
    # every kept batch from start on, in order, byte for byte what the subscriber received
    assert [s for s, _ in got][:4] == list(range(start, start + 4))
    for s, payload in got:
        if s in have:
            assert have[s] == payload
    # vLLM's example subscriber asks with a REQ socket: the same answer, one message per batch
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(f"tcp://127.0.0.1:{master.kv_replay_port}")
    req.send(max(have).to_bytes(8, "big"))
    assert req.poll(20000)
    seq, payload = req.recv_multipart()
    assert int.from_bytes(seq, "big") == max(have) and payload == have[max(have)]
    dealer.close()
    req.close()


def test_malformed_replay_request(pool):
    master, _, _, ctx = pool
    before = master.metric("mooncake_master_kv_events_malformed_replay_requests_total")
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(f"tcp://127.0.0.1:{master.kv_replay_port}")
    for bad in ([b"", b"abc"], [b"x", b"y", b"z"], [b"", b"\x00" * 9]):
        dealer.send_multipart(bad)
        assert dealer.poll(20000)
        assert dealer.recv_multipart()[-2:] == [END_SEQ, b""]
    assert wait_for(lambda: master.metric(
        "mooncake_master_kv_events_malformed_replay_requests_total") == before + 3)
    # garbage that is no ZMTP at all: that connection is closed, the endpoint keeps serving
    import socket
    with socket.create_connection(("127.0.0.1", master.kv_replay_port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"\x00" * 64)
        s.settimeout(10)
        while s.recv(4096):
            pass
    dealer.send_multipart([b"", (1).to_bytes(8, "big")])
    assert dealer.poll(20000)
    dealer.close()


@pytest.mark.parametrize("flags,why", [
    (["--enable_kv_events"], "kv_events_bind_endpoint"),
    (["--enable_kv_events", "--kv_events_bind_endpoint=udp://1.2.3.4:5",
      "--kv_events_backend_id=x"], "tcp://host:port"),
    (["--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0"],
     "kv_events_backend_id"),
    (["--kv_events_queue_capacity=-1"], "kv_events_queue_capacity"),
])
def test_flags_that_cannot_work_are_refused(flags, why):
    r = subprocess.run([binary_path("mooncake_master"), "--port=0", "--metrics_port=0", *flags],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert why in r.stdout + r.stderr


def test_a_taken_port_is_refused(pool):
    master, _, _, _ = pool
    r = subprocess.run([binary_path("mooncake_master"), "--port=0", "--metrics_port=0",
                        "--enable_kv_events", "--kv_events_backend_id=b",
                        f"--kv_events_bind_endpoint=tcp://127.0.0.1:{master.kv_events_port}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "kv_events" in r.stdout + r.stderr


def test_a_full_queue_drops_the_oldest_and_says_so():
    """Capacity 1 against a batch of 2000 puts: events are dropped, counted, and their sequence
    numbers skipped, so the subscriber sees the gap; nothing is lost uncounted."""
    master = Master("--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_backend_id=tiny", "--kv_events_queue_capacity=1")
    worker = Worker()
    ctx = zmq.Context()
    try:
        worker.setup(master, segment=SEGMENT)
        sub = Sub(ctx, master.kv_events_port)
        puts = subscribed(worker, sub)
        n = 2000
        keys = [str(10**6 + i) for i in range(n)]
        rcs = worker.run(f"result = store.put_batch({keys!r}, [b'd'] * {n})")
        assert rcs == 0 or all(rc == 0 for rc in rcs)
        puts += n

        def settled():
            published = master.metric("mooncake_master_kv_events_published_events_total")
            dropped = master.metric("mooncake_master_kv_events_dropped_events_total")
            return published + dropped == puts

        assert wait_for(settled, timeout=30)
        assert master.metric("mooncake_master_kv_events_dropped_events_total") > 0
        assert master.metric("mooncake_master_kv_events_queued_events") == 0
        sub.drain(500)
        seqs = [s for s, _, _ in sub.msgs]
        assert seqs == sorted(seqs)
        assert seqs[-1] - seqs[0] + 1 > len(seqs)  # the dropped events left holes
        # every event that came is one of ours, whole
        assert all(e["object_key"] in keys or e["object_key"].isdigit() for e in sub.events())
    finally:
        worker.close()
        master.stop()
        ctx.destroy(linger=0)


def test_offload_to_the_disk_tier_is_announced(tmp_path):
    """--enable_offload with a storage node that has a disk: each object put is announced on
    "cpu", then again on "disk" once its copy is durable there; a remove takes both away."""
    from node_helpers import Node

    master = Master("--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_backend_id=tiered", "--enable_offload")
    node = pure = None
    ctx = zmq.Context()
    try:
        node = Node(master, segment="32mb", http=True,
                    extra=[f"--root_fs_dir={tmp_path / 'tier'}", "--disk_capacity=64mb"])
        pure = Worker()
        pure.setup(master, segment=0)
        sub = Sub(ctx, master.kv_events_port)
        subscribed(pure, sub)
        assert pure.run("result = store.put('4242', b'd' * 4096)") == 0
        on_disk = sub.wait_event(lambda e: e["object_key"] == "4242" and
                                 e["event_type"] == "stored" and e["medium"] == "disk")
        assert on_disk[0]["seq_hashes"] == [4242]
        assert sub.wait_event(lambda e: e["object_key"] == "4242" and e["medium"] == "cpu")
        assert pure.run("result = store.remove('4242')") == 0
        sub.wait_event(lambda e: e["object_key"] == "4242" and e["event_type"] == "removed" and
                       e["medium"] == "cpu")
        sub.wait_event(lambda e: e["object_key"] == "4242" and e["event_type"] == "removed" and
                       e["medium"] == "disk")
    finally:
        if pure:
            pure.close()
        if node:
            node.stop()
        master.stop()
        ctx.destroy(linger=0)
