"""mooncake_conductor end to end: a real master publishing KV events (the shared tier) and an
engine-like publisher on a real libzmq PUB socket (pyzmq) sending vLLM's batch layout; the
conductor subscribes to both through its own ZMTP code and answers /query_by_hash with each
source's leading blocks per medium, through stores and removals; malformed events are counted;
wrong requests get the reference's error shapes (ConductorClient raises ConductorError)."""

import re
import subprocess
import threading
import time

import msgpack
import pytest
import zmq
from store_helpers import Master, Worker, wait_for

from mooncake.cli import binary_path
from mooncake.conductor import ConductorClient, ConductorError

BS = 16


@pytest.fixture
def conductor():
    proc = subprocess.Popen([binary_path("mooncake_conductor"), "--host=127.0.0.1", "--port=0",
                             "--max_blocks=100000"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        deadline = time.monotonic() + 20
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening port=(\d+)", line)
            if m:
                port = int(m.group(1))
        assert port, "mooncake_conductor did not start"
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield ConductorClient(f"http://127.0.0.1:{port}"), proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def vllm_batch(events, dp_rank=0):
    """vLLM's map layout (its EventBatch / tagged event structs as msgspec writes them)."""
    return msgpack.packb({"ts": time.time(), "events": events, "data_parallel_rank": dp_rank})


def stored(hashes, medium="GPU"):
    return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": None,
            "token_ids": list(range(BS * len(hashes))), "block_size": BS, "lora_id": None,
            "medium": medium, "lora_name": None}


def test_conductor_end_to_end(conductor):
    client, proc = conductor
    assert client.health()
    master = Master("--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_replay_endpoint=tcp://127.0.0.1:0", "--kv_events_backend_id=pool")
    worker = Worker()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    engine_port = pub.bind_to_random_port("tcp://127.0.0.1")
    try:
        worker.setup(master)
        r = client.register(f"tcp://127.0.0.1:{master.kv_events_port}", "Mooncake", "m", "pool",
                            BS, replay_endpoint=f"tcp://127.0.0.1:{master.kv_replay_port}")
        assert r["status"] == "registered successfully"
        client.register(f"tcp://127.0.0.1:{engine_port}", "vLLM", "m", "engine-a", BS, dp_rank=0)
        # the same service again, or the same endpoint: refused
        with pytest.raises(ConductorError) as e:
            client.register(f"tcp://127.0.0.1:{engine_port}", "vLLM", "m", "engine-b", BS)
        assert e.value.status == 400 and e.value.reason == "invalid_registration"
        assert {s["instance_id"] for s in client.list_services()} == {"pool", "engine-a"}

        # the master's subscription takes effect asynchronously: put probes until one is indexed
        n = 0

        def pool_indexed():
            nonlocal n
            n += 1
            assert worker.run(f"result = store.put('{900000 + n}', b'p')") == 0
            return client.metrics()["mooncake_conductor_events_total"] > 0

        assert wait_for(pool_indexed, timeout=30)
        for k in ("101", "102", "103"):
            assert worker.run(f"result = store.put({k!r}, b'v' * 100)") == 0

        def shared_cpu():
            q = client.query_by_hash("m", BS, [101, 102, 103, 104])
            return q["shared"].get("pool", {}).get("cpu")

        assert wait_for(lambda: shared_cpu() == 3 * BS, timeout=30)
        assert worker.run("result = store.remove('102')") == 0
        assert wait_for(lambda: shared_cpu() == BS, timeout=30)

        # the engine: GPU blocks 101, 102 on rank 0
        seq = 0

        def engine_indexed():
            nonlocal seq
            seq += 1
            pub.send_multipart([b"", seq.to_bytes(8, "big"), vllm_batch([stored([101, 102])])])
            row = client.query_by_hash("m", BS, [101, 102, 103])["instances"].get("engine-a|0")
            return row and row["gpu"] == 2 * BS

        assert wait_for(engine_indexed, timeout=30)
        row = client.query_by_hash("m", BS, [101, 102, 103])["instances"]["engine-a|0"]
        assert row["longest_matched"] == 2 * BS and row["cpu"] == 0
        # another model's context sees none of it
        assert client.query_by_hash("other", BS, [101])["instances"] == {}
        # removal, then a payload that is no batch: counted, the service goes on
        seq += 1
        pub.send_multipart([b"", seq.to_bytes(8, "big"),
                            vllm_batch([{"type": "BlockRemoved", "block_hashes": [102],
                                         "medium": "GPU"}])])
        assert wait_for(lambda: client.query_by_hash("m", BS, [101, 102])["instances"]
                        ["engine-a|0"]["gpu"] == BS, timeout=30)
        seq += 1
        pub.send_multipart([b"", seq.to_bytes(8, "big"), b"\xc1garbage"])
        assert wait_for(lambda: client.metrics()["mooncake_conductor_malformed_batches_total"]
                        >= 1, timeout=30)
        assert client.health()
        # unregister: the engine's blocks go with it
        r = client.unregister("engine-a", 0)
        assert r["removed_instances"] == ["engine-a|default|0"]
        assert "engine-a|0" not in client.query_by_hash("m", BS, [101])["instances"]
        with pytest.raises(ConductorError) as e:
            client.unregister("engine-a", 0)
        assert e.value.status == 404
    finally:
        pub.close()
        ctx.destroy(linger=0)
        worker.close()
        master.stop()
    assert proc.poll() is None


@pytest.mark.parametrize("path,body,reason", [
    ("/register", {"endpoint": "tcp://127.0.0.1:1"}, "missing_field"),
    ("/register", {"endpoint": "tcp://127.0.0.1:1", "type": "vLLM", "modelname": "m",
                   "instance_id": "x", "block_size": 16, "dp_rank": 0, "colour": 1},
     "unknown_field"),
    ("/register", {"endpoint": "tcp://127.0.0.1:1", "type": "TGI", "modelname": "m",
                   "instance_id": "x", "block_size": 16, "dp_rank": 0}, "invalid_field"),
    ("/register", {"endpoint": "udp://h:1", "type": "vLLM", "modelname": "m",
                   "instance_id": "x", "block_size": 16, "dp_rank": 0}, "invalid_field"),
    ("/register", [1, 2], "invalid_body"),
    ("/unregister", {"instance_id": "x"}, "missing_field"),
    ("/query_by_hash", {"model": "m", "block_size": 16, "block_hashes": ["a"]}, "invalid_field"),
    ("/query_by_hash", {"model": "m", "block_size": -1, "block_hashes": []}, "invalid_field"),
])
def test_wrong_requests(conductor, path, body, reason):
    client, proc = conductor
    with pytest.raises(ConductorError) as e:
        client._request("POST", path, body)
    assert e.value.status == 400 and e.value.reason == reason
    assert client.health() and proc.poll() is None


def test_a_gap_is_filled_from_a_libzmq_replay_router(conductor):
    """An engine publisher as vLLM's: PUB plus a ROUTER answering [id, "", start] with
    [id, "", seq, payload] ... [id, "", -1, ""]. A batch the conductor never received live is
    fetched from it, and its blocks are indexed."""
    client, _ = conductor
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    router = ctx.socket(zmq.ROUTER)
    for s in (pub, router):
        s.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    rport = router.bind_to_random_port("tcp://127.0.0.1")
    kept = {}
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            if not router.poll(50):
                continue
            frames = router.recv_multipart()
            if len(frames) != 3:
                continue
            ident, _, start = frames
            for seq in sorted(kept):
                if seq >= int.from_bytes(start, "big"):
                    router.send_multipart([ident, b"", seq.to_bytes(8, "big"), kept[seq]])
            router.send_multipart([ident, b"", (-1).to_bytes(8, "big", signed=True), b""])

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        client.register(f"tcp://127.0.0.1:{port}", "vLLM", "m", "engine-r", BS,
                        replay_endpoint=f"tcp://127.0.0.1:{rport}")
        seq = 0

        def send(hashes, live=True):
            nonlocal seq
            seq += 1
            payload = vllm_batch([stored(hashes)])
            kept[seq] = payload
            if live:
                pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])

        def indexed(h):
            row = client.query_by_hash("m", BS, [h])["instances"].get("engine-r|0")
            return bool(row and row["gpu"])

        def first():
            send([1])
            return indexed(1)

        assert wait_for(first, timeout=30)
        send([2], live=False)  # missed
        send([3])
        assert wait_for(lambda: indexed(2) and indexed(3), timeout=30)
        m = client.metrics()
        assert m["mooncake_conductor_sequence_gaps_total"] == 1
        assert m["mooncake_conductor_replayed_batches_total"] == 1
        assert m["mooncake_conductor_lost_batches_total"] == 0
    finally:
        stop.set()
        server.join(timeout=5)
        pub.close()
        router.close()
        ctx.destroy(linger=0)
