"""mooncake_conductor end to end: a real master publishing KV events (the shared tier) and an
engine-like publisher on a real libzmq PUB socket (pyzmq) sending vLLM's batch layout; the
conductor subscribes to both through its own ZMTP code and answers /query_by_hash with each
source's leading blocks per medium, through stores and removals; malformed events are counted;
wrong requests get the reference's error shapes (ConductorClient raises ConductorError)."""

import json
import os
import pathlib
import re
import subprocess
import threading
import time

import msgpack
import pytest
import zmq
from store_helpers import Master, Worker, wait_for

from mooncake.cli import binary_path
from mooncake.conductor import ConductorClient, ConductorError, hash_profile

BS = 16


def spawn_conductor(*args, env=None):
    """A mooncake_conductor process and its port (it prints the port it listens on)."""
    proc = subprocess.Popen([binary_path("mooncake_conductor"), "--host=127.0.0.1", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    port = None
    deadline = time.monotonic() + 20
    while port is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening port=(\d+)", line)
        if m:
            port = int(m.group(1))
    if not port:
        proc.kill()
        proc.wait()
        raise AssertionError("mooncake_conductor did not start")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return proc, port


def stop_conductor(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def conductor():
    proc, port = spawn_conductor("--port=0", "--max_blocks=100000")
    try:
        yield ConductorClient(f"http://127.0.0.1:{port}"), proc
    finally:
        stop_conductor(proc)


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
        services = client.list_services()
        assert services["count"] == 2
        assert {s["InstanceID"] for s in services["services"]} == {"pool", "engine-a"}

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
    fetched from it, and its blocks are indexed: /query's prefix runs through it."""
    client, _ = conductor
    tokens, h = golden("sha256_cbor", "0", BS)
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
                        replay_endpoint=f"tcp://127.0.0.1:{rport}",
                        hash_profile=hash_profile("sha256_cbor", "0"))
        seq = 0

        def send(hashes, live=True):
            nonlocal seq
            seq += 1
            payload = vllm_batch([stored(hashes)])
            kept[seq] = payload
            if live:
                pub.send_multipart([b"", seq.to_bytes(8, "big"), payload])

        def prefix():
            return client.query("m", BS, tokens)["instances"]["engine-r"]["gpu"] // BS

        def first():
            send(h[:1])
            return prefix() == 1

        assert wait_for(first, timeout=30)
        send(h[1:2], live=False)  # missed
        send(h[2:3])
        assert wait_for(lambda: prefix() == 3, timeout=30)
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


def golden(algorithm, seed, block_size):
    """A request's tokens and the block hashes vLLM's own code gives them (hash_golden.json)."""
    path = (pathlib.Path(__file__).resolve().parents[4] / "mooncake-conductor" / "tests" /
            "golden" / "hash_golden.json")
    for c in json.loads(path.read_text())["cases"]:
        if (c["strategy"], c["algorithm"], c["seed"], c["block_size"], c["lora_name"],
                c["cache_salt"]) == ("vllm_v1", algorithm, seed, block_size, "", ""):
            return c["token_ids"], [int(h, 16) for h in c["hashes"]]
    raise LookupError(algorithm)


def test_query_from_token_ids(conductor):
    """POST /query: token ids hashed as vLLM hashes them (sha256_cbor, PYTHONHASHSEED=0), then
    each engine's ordered GPU -> shared CPU -> shared disk walk, per rank, through a real
    master's stores and removals (the shared tier), two engine publishers on pyzmq PUB sockets
    sending the bytes vLLM's own event classes and encoder wrote, kept as test data since vLLM
    itself is not installed here (a: vLLM 0.11.0's array events with 64-bit integer hashes; b:
    vLLM 0.34.0's tagged map events with the 32-byte digests it sends by default), with their
    GPU stores and evictions, and one engine's restart."""
    client, proc = conductor
    tokens, h = golden("sha256_cbor", "0", BS)
    assert len(h) == 5 and len(tokens) == 5 * BS + BS // 2
    prof = hash_profile("sha256_cbor", "0")
    # engine b speaks as vLLM 0.34 writes its batches: the EventBatch array [ts, events, rank]
    # (array_like), tagged map events, block hashes as the full 32-byte digests; its payloads are
    # vLLM's own encoder's bytes (below)

    master = Master("--enable_kv_events", "--kv_events_bind_endpoint=tcp://127.0.0.1:0",
                    "--kv_events_backend_id=pool")
    worker = Worker()
    ctx = zmq.Context()
    pubs, ports, seqs = {}, {}, {"a": 0, "b": 0}
    for name in ("a", "b"):
        pubs[name] = ctx.socket(zmq.PUB)
        pubs[name].setsockopt(zmq.LINGER, 0)
        ports[name] = pubs[name].bind_to_random_port("tcp://127.0.0.1")

    # engine b's batches as vLLM 0.34.0's own event classes and encoder wrote them
    # (mooncake-conductor/tests/golden/make_event_golden.py): GPU stores of blocks [0], [2], [0, 1]
    golden_dir = pathlib.Path(__file__).resolve().parents[4] / "mooncake-conductor" / "tests" / \
        "golden"
    vllm_made = {blocks: (golden_dir / f"vllm_e2e_store_{name}.msgpack").read_bytes()
                 for blocks, name in (((h[0],), "0"), ((h[2],), "2"), ((h[0], h[1]), "01"))}
    for blocks, payload in vllm_made.items():  # the layout engine b is said to speak
        ts, events, rank = msgpack.unpackb(payload, raw=False)
        assert rank == 0 and [e["type"] for e in events] == ["BlockStored"]
        # full 32-byte digests whose last 8 bytes are vLLM's hashes of those blocks
        assert all(len(d) == 32 for d in events[0]["block_hashes"])
        assert [int.from_bytes(d[-8:], "big") for d in events[0]["block_hashes"]] == list(blocks)
    # engine a's, as vLLM 0.11.0's classes wrote them: array events, 64-bit integer hashes
    older_made = {("BlockStored", h[0], h[1]): "store_01", ("BlockRemoved", h[1]): "remove_1"}
    older_made = {k: (golden_dir / f"vllm_e2e_int_{v}.msgpack").read_bytes()
                  for k, v in older_made.items()}
    for (kind, *blocks), payload in older_made.items():
        ts, events, rank = msgpack.unpackb(payload, raw=False)
        assert rank == 0 and events[0][0] == kind
        assert [x % (1 << 64) for x in events[0][1]] == blocks

    def publish(name, event):
        seqs[name] += 1
        key = tuple(event["block_hashes"])
        payload = (vllm_made[key] if name == "b" else
                   older_made[(event["type"], *key)])
        pubs[name].send_multipart([b"", seqs[name].to_bytes(8, "big"), payload])

    def row(instance):
        return client.query("m", BS, tokens)["instances"].get(instance)

    def tiers(instance):
        r = row(instance)
        return r and (r["gpu"] // BS, r["cpu"] // BS, r["disk"] // BS)

    try:
        worker.setup(master)
        client.register(f"tcp://127.0.0.1:{master.kv_events_port}", "Mooncake", "m", "pool", BS,
                        hash_profile=prof)
        for name in ("a", "b"):
            client.register(f"tcp://127.0.0.1:{ports[name]}", "vLLM", "m", f"engine-{name}", BS,
                            hash_profile=prof)
        # registered, nothing held: a zero row per engine, none for the pool
        q = client.query("m", BS, tokens)
        assert set(q["instances"]) == {"engine-a", "engine-b"}
        assert q["instances"]["engine-a"] == {"longest_matched": 0, "gpu": 0, "cpu": 0,
                                              "disk": 0, "dp": {"0": 0},
                                              "rank_matches": {"0": {"gpu": 0, "cpu": 0,
                                                                     "disk": 0}}}
        # a group with another profile, or a profile the conductor cannot compute: refused
        for bad_prof, reason in ((hash_profile("sha256", "0"), "invalid_registration"),
                                 (hash_profile("md5", "0"), "invalid_field")):
            with pytest.raises(ConductorError) as e:
                client.register("tcp://127.0.0.1:1", "vLLM", "m", "engine-c", BS,
                                hash_profile=bad_prof)
            assert e.value.status == 400 and e.value.reason == reason

        # the engines' GPU blocks: a holds blocks 0-1, b block 0
        def gpu_seen():
            publish("a", stored(h[:2]))
            publish("b", stored(h[:1]))
            return tiers("engine-a") == (2, 2, 2) and tiers("engine-b") == (1, 1, 1)

        assert wait_for(gpu_seen, timeout=30)
        # the pool: blocks 1-3 in memory, keys being the block hashes as the master reads them
        for x in h[1:4]:
            assert worker.run(f"result = store.put('{x}', b'kv' * 64)") == 0
        assert wait_for(lambda: tiers("engine-a") == (2, 4, 4) and tiers("engine-b") == (1, 4, 4),
                        timeout=30)
        r = row("engine-b")
        assert r["longest_matched"] == 4 * BS and r["dp"] == {"0": BS}
        assert r["rank_matches"] == {"0": {"gpu": BS, "cpu": 4 * BS, "disk": 4 * BS}}
        # a removal in the pool cuts the CPU run where it falls
        assert worker.run(f"result = store.remove('{h[2]}')") == 0
        assert wait_for(lambda: tiers("engine-a") == (2, 2, 2) and tiers("engine-b") == (1, 2, 2),
                        timeout=30)
        # an eviction on a's GPU: block 1 is still in the pool's memory
        publish("a", {"type": "BlockRemoved", "block_hashes": [h[1]], "medium": "GPU"})
        assert wait_for(lambda: tiers("engine-a") == (1, 2, 2), timeout=30)
        # filters: one instance; another LoRA or model is another group (no rows)
        assert set(client.query("m", BS, tokens, instance_id="engine-b")["instances"]) == {
            "engine-b"}
        assert client.query("m", BS, tokens, instance_id="nobody")["instances"] == {}
        assert client.query("m", BS, tokens, lora_name="x")["instances"] == {}
        assert client.query("other", BS, tokens)["instances"] == {}
        # a salted request hashes differently from block 0 on: nothing matches
        assert client.query("m", BS, tokens, cache_salt="s")["instances"]["engine-a"][
            "longest_matched"] == 0
        # an array of ints is the same request as the bin form
        body = {"model": "m", "block_size": BS, "token_ids": tokens}
        assert client._request("POST", "/query", body)["instances"]["engine-a"]["gpu"] == BS

        # engine b restarts: its sequence starts over, what it held is forgotten, new stores count.
        # A long-lived publisher's sequence is far ahead of a new one's: the restarted one's
        # numbers stay below it for the whole wait, however late the reconnect comes.
        seqs["b"] = 10**6 - 1
        publish("b", stored(h[:1]))
        assert wait_for(lambda: any(s["LastSeq"] == 10**6 for s in
                                    client.list_services()["services"]), timeout=30)
        pubs["b"].close()
        pubs["b"] = ctx.socket(zmq.PUB)
        pubs["b"].setsockopt(zmq.LINGER, 0)

        def rebound():  # libzmq closes the old socket in its own thread: the port frees later
            try:
                pubs["b"].bind(f"tcp://127.0.0.1:{ports['b']}")
                return True
            except zmq.ZMQError:
                return False

        assert wait_for(rebound, timeout=30)
        seqs["b"] = 0

        def restarted():
            publish("b", stored(h[2:3]))  # block 2 alone: no prefix of its own
            return client.metrics()["mooncake_conductor_publisher_restarts_total"] >= 1

        assert wait_for(restarted, timeout=30)
        assert wait_for(lambda: tiers("engine-b") == (0, 0, 0), timeout=30)
        publish("b", stored(h[:2]))  # with block 2 from before: GPU 0-2, then the pool's 3
        assert wait_for(lambda: tiers("engine-b") == (3, 4, 4), timeout=30)

        view = client.global_view()
        assert view["context_count"] == 1
        group = view["contexts"][0]
        assert group["instances"] == {"engine-a": [0], "engine-b": [0]}
        assert group["prefix_count"] >= 3 and group["tenant_id"] == "default"
        assert group["hash_profile"]["root_digest"] == (
            "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e")
        services = client.list_services()
        assert services["count"] == 3
        assert {s["Type"] for s in services["services"]} == {"Mooncake", "vLLM"}
        assert all(s["CacheGroup"] is None for s in services["services"])
    finally:
        for p in pubs.values():
            p.close()
        ctx.destroy(linger=0)
        worker.close()
        master.stop()
    assert proc.poll() is None


@pytest.mark.parametrize("body,reason,field", [
    ({"model": "m", "block_size": 16}, "missing_field", None),
    ({"model": "m", "block_size": 16, "token_ids": ["a"]}, "invalid_type", "token_ids"),
    ({"model": "m", "block_size": 16, "token_ids": [1, 2**40]}, "invalid_type", "token_ids"),
    ({"model": "m", "block_size": 16, "token_ids": b"abc"}, "invalid_field", "token_ids"),
    ({"model": "m", "block_size": 0, "token_ids": []}, "invalid_field", "block_size"),
    ({"model": "m", "block_size": 16, "token_ids": [], "root_digest": "x"}, "unknown_field",
     "root_digest"),
    ([1], "invalid_msgpack", None),
])
def test_wrong_queries(conductor, body, reason, field):
    client, proc = conductor
    with pytest.raises(ConductorError) as e:
        client._request("POST", "/query", body)
    assert e.value.status == 400 and e.value.reason == reason and e.value.field == field
    assert client.health() and proc.poll() is None


def test_wrong_methods(conductor):
    client, _ = conductor
    for method, path in (("GET", "/query"), ("GET", "/register"), ("POST", "/global_view")):
        with pytest.raises(ConductorError) as e:
            client._request(method, path, {} if method == "POST" else None)
        assert e.value.status == 405
    with pytest.raises(ConductorError) as e:
        client._request("GET", "/nothing")
    assert e.value.status == 404


def test_config_file_static_subscriptions(tmp_path):
    """The reference's config file (CONDUCTOR_CONFIG_PATH): http_server_port, and kvevent_instance
    entries registered at start (the entry's name is its instance_id); a bad entry is logged and
    skipped, the others serve."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    prof = hash_profile("sha256_cbor", "0")
    cfg = tmp_path / "conductor_config.json"
    cfg.write_text(json.dumps({"http_server_port": 0, "kvevent_instance": {
        "engine-s": {"type": "vLLM", "endpoint": f"tcp://127.0.0.1:{port}", "modelname": "m",
                     "block_size": BS, "dp_rank": 0, "hash_profile": prof},
        "broken": {"type": "vLLM", "endpoint": "tcp://127.0.0.1:1", "modelname": "m",
                   "block_size": BS, "dp_rank": 0,
                   "hash_profile": dict(prof, algorithm="md5")},
    }}))
    env = dict(os.environ, CONDUCTOR_CONFIG_PATH=str(cfg))
    proc, http_port = spawn_conductor(env=env)
    try:
        client = ConductorClient(f"http://127.0.0.1:{http_port}")
        services = client.list_services()
        assert services["count"] == 1
        assert services["services"][0]["InstanceID"] == "engine-s"
        assert services["services"][0]["HashProfile"]["python_hash_seed"] == "0"
        tokens, h = golden("sha256_cbor", "0", BS)
        seq = 0

        def held():
            nonlocal seq
            seq += 1
            pub.send_multipart([b"", seq.to_bytes(8, "big"), vllm_batch([stored(h[:3])])])
            return client.query("m", BS, tokens)["instances"]["engine-s"]["gpu"] == 3 * BS

        assert wait_for(held, timeout=30)
    finally:
        stop_conductor(proc)
        pub.close()
        ctx.destroy(linger=0)
    # a config file that is no JSON object: refused at start
    cfg.write_text("[1, 2")
    bad = subprocess.run([binary_path("mooncake_conductor"), "--port=0"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "not a JSON object" in bad.stderr
