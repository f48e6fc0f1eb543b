"""The conductor's cost: POST /query latency and event ingest rate as the prefix length,
the engine instances and the tenants grow, against two floors measured in the same run
(the HTTP round trip of GET /health; the plain in-process lookup: hashing the request in Python
as vLLM does and walking sets of the same blocks; and, with conductor_lookup_bench, the same
hashing and walk in C over the conductor's own prefix table, in one process); and, when
mc_master_bench is given, the master's put rate with KV events off and on.

  python -m benchmarks.conductor [--queries 200] [--ingest-events 5000]
      [--lookup-bench build/.../conductor_lookup_bench]
      [--master-bench build/.../mc_master_bench]

Every case starts a fresh mooncake_conductor. Each engine instance is a pyzmq PUB socket
publishing vLLM's batch layout; instance i of n holds the first (i+1)/n of the prefix on GPU, so
the walks differ. Hashes are vLLM's sha256_cbor chain with PYTHONHASHSEED=0, computed here in
Python (the same values the conductor computes in C; each case checks that the longest match is
the whole prefix). The ingest-limit cases send pre-encoded batches as fast as pyzmq can, and print
that send rate beside the conductor's. Prints markdown tables; docs/perf/conductor.md records a
run.
"""

import argparse
import hashlib
import http.client
import os
import re
import statistics
import struct
import subprocess
import threading
import time

import msgpack
import zmq

from mooncake.cli import binary_path
from mooncake.conductor import ConductorClient, hash_profile

BS = 16
HASHES_PER_EVENT = 64


def cbor_head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for add, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | add]) + n.to_bytes(size, "big")
    raise ValueError(n)


def vllm_chain(tokens, seed="0"):
    """vLLM's sha256_cbor block hashes (no extra keys), as low64_be values."""
    parent = hashlib.sha256(cbor_head(3, len(seed)) + seed.encode()).digest()
    out = []
    for b in range(len(tokens) // BS):
        block = tokens[b * BS:(b + 1) * BS]
        enc = bytearray(cbor_head(4, 3) + cbor_head(2, 32) + parent + cbor_head(4, BS))
        for t in block:
            enc += cbor_head(0, t)
        enc += b"\xf6"
        parent = hashlib.sha256(enc).digest()
        out.append(int.from_bytes(parent[-8:], "big"))
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


class Conductor:
    def __init__(self):
        self.proc = subprocess.Popen(
            [binary_path("mooncake_conductor"), "--host=127.0.0.1", "--port=0",
             "--max_blocks=10000000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        port = None
        while port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("mooncake_conductor did not start")
            m = re.search(r"listening port=(\d+)", line)
            port = int(m.group(1)) if m else None
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.port = port
        self.client = ConductorClient(f"http://127.0.0.1:{port}", timeout=60)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def post(port, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/msgpack"})
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, data
        return data
    finally:
        conn.close()


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        return conn.getresponse().read()
    finally:
        conn.close()


def c_lookup(path, tokens_len, instances, iterations):
    """conductor_lookup_bench's p50 in ms: the same hashing and walk in C, in one process."""
    r = subprocess.run([path, str(tokens_len), str(instances), str(iterations)],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"p50_us=([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"conductor_lookup_bench said:\n{r.stdout}{r.stderr}")
    return float(m.group(1)) / 1e3


def run_case(tokens_len, instances, tenants, queries):
    tokens = [(i * 7919 + 13) % 50000 for i in range(tokens_len)]
    hashes = vllm_chain(tokens)
    c = Conductor()
    ctx = zmq.Context()
    pubs = []
    try:
        prof = hash_profile("sha256_cbor", "0")
        for t in range(tenants):
            for i in range(instances):
                pub = ctx.socket(zmq.PUB)
                pub.setsockopt(zmq.LINGER, 0)
                pub.setsockopt(zmq.SNDHWM, 0)
                port = pub.bind_to_random_port("tcp://127.0.0.1")
                c.client.register(f"tcp://127.0.0.1:{port}", "vLLM", "m", f"e{i}", BS,
                                  tenant_id=f"t{t}", hash_profile=prof)
                pubs.append((pub, (i + 1) * len(hashes) // instances))
        # the subscriptions connect asynchronously: a probe per publisher until all are seen
        seq = {id(p): 0 for p, _ in pubs}

        def send(pub, hs):
            seq[id(pub)] += 1
            ev = {"type": "BlockStored", "block_hashes": hs, "parent_block_hash": None,
                  "token_ids": [], "block_size": BS, "lora_id": None, "medium": "GPU",
                  "lora_name": None}
            payload = msgpack.packb({"ts": time.time(), "events": [ev],
                                     "data_parallel_rank": 0})
            pub.send_multipart([b"", seq[id(pub)].to_bytes(8, "big"), payload])

        deadline = time.monotonic() + 60
        while any(s["Events"] == 0 for s in c.client.list_services()["services"]):
            for pub, _ in pubs:
                send(pub, [1])
            time.sleep(0.05)
            assert time.monotonic() < deadline, "subscriptions did not connect"
        base_events = c.client.metrics()["mooncake_conductor_events_total"]
        # ingest: every instance's prefix, 64 hashes an event
        t0 = time.perf_counter()
        n_events = n_blocks = 0
        for pub, held in pubs:
            for off in range(0, held, HASHES_PER_EVENT):
                send(pub, hashes[off:min(held, off + HASHES_PER_EVENT)])
                n_events += 1
                n_blocks += min(held, off + HASHES_PER_EVENT) - off
        while c.client.metrics()["mooncake_conductor_events_total"] < base_events + n_events:
            time.sleep(0.002)
            assert time.perf_counter() - t0 < 300, "ingest did not finish"
        ingest_s = time.perf_counter() - t0
        # queries: tenant t0, over fresh connections as a router's client would make them
        body = msgpack.packb({"model": "m", "block_size": BS, "tenant_id": "t0",
                              "token_ids": struct.pack(f"<{len(tokens)}i", *tokens)},
                             use_bin_type=True)
        answer = msgpack.unpackb(post(c.port, "/query", body), raw=False)
        top = answer["instances"][f"e{instances - 1}"]
        assert top["longest_matched"] == len(hashes) * BS, top
        lat = []
        for _ in range(queries):
            q0 = time.perf_counter()
            post(c.port, "/query", body)
            lat.append(time.perf_counter() - q0)
        floor = []
        for _ in range(queries):
            q0 = time.perf_counter()
            get(c.port, "/health")
            floor.append(time.perf_counter() - q0)
        # the in-process limit: the same hashing and walk, in this process, no service at all
        held = [set(hashes[:n]) for _, n in pubs[:instances]]
        local = []
        for _ in range(max(10, queries // 10)):
            q0 = time.perf_counter()
            hs = vllm_chain(tokens)
            best = [next((k for k, h in enumerate(hs) if h not in s), len(hs)) for s in held]
            local.append(time.perf_counter() - q0)
        assert max(best) == len(hashes)
        return {
            "tokens": tokens_len, "instances": instances, "tenants": tenants,
            "blocks": n_blocks, "ingest_blocks_s": n_blocks / ingest_s,
            "ingest_events_s": n_events / ingest_s,
            "p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3,
            "health_p50_ms": percentile(floor, 50) * 1e3,
            "local_p50_ms": percentile(local, 50) * 1e3,
        }
    finally:
        for pub, _ in pubs:
            pub.close()
        ctx.destroy(linger=0)
        c.close()


def ingest_case(publishers, events_each):
    """The conductor's own ingest limit: batches encoded beforehand, sent as fast as pyzmq
    sends them; the send time alone is the publisher's floor."""
    c = Conductor()
    ctx = zmq.Context()
    pubs = []
    try:
        for i in range(publishers):
            pub = ctx.socket(zmq.PUB)
            pub.setsockopt(zmq.LINGER, 0)
            pub.setsockopt(zmq.SNDHWM, 0)
            port = pub.bind_to_random_port("tcp://127.0.0.1")
            c.client.register(f"tcp://127.0.0.1:{port}", "vLLM", "m", f"e{i}", BS)
            pubs.append(pub)
        deadline = time.monotonic() + 60
        probe = msgpack.packb({"ts": 0.0, "events": [], "data_parallel_rank": 0})
        while any(s["LastSeq"] == 0 for s in c.client.list_services()["services"]):
            for pub in pubs:
                pub.send_multipart([b"", (1).to_bytes(8, "big"), probe])
            time.sleep(0.05)
            assert time.monotonic() < deadline, "subscriptions did not connect"
        frames = []
        for k in range(events_each):
            hs = [(k * HASHES_PER_EVENT + j) * 2654435761 % (1 << 63)
                  for j in range(HASHES_PER_EVENT)]
            ev = {"type": "BlockStored", "block_hashes": hs, "parent_block_hash": None,
                  "token_ids": [], "block_size": BS, "lora_id": None, "medium": "GPU",
                  "lora_name": None}
            frames.append([b"", (k + 2).to_bytes(8, "big"),
                           msgpack.packb({"ts": 0.0, "events": [ev], "data_parallel_rank": 0})])
        base = c.client.metrics()["mooncake_conductor_events_total"]
        t0 = time.perf_counter()
        for f in frames:
            for pub in pubs:
                pub.send_multipart(f)
        sent_s = time.perf_counter() - t0
        want = base + events_each * publishers
        while c.client.metrics()["mooncake_conductor_events_total"] < want:
            time.sleep(0.005)
            assert time.perf_counter() - t0 < 300, "ingest did not finish"
        took = time.perf_counter() - t0
        blocks = events_each * publishers * HASHES_PER_EVENT
        m = c.client.metrics()
        return {"publishers": publishers, "blocks": blocks, "blocks_s": blocks / took,
                "send_blocks_s": blocks / sent_s, "lost": m["mooncake_conductor_lost_batches_total"]}
    finally:
        for pub in pubs:
            pub.close()
        ctx.destroy(linger=0)
        c.close()


def master_bench(path, runs):
    out = {0: [], 1: []}
    for _ in range(runs):
        for ev in (0, 1):
            r = subprocess.run([path, "--objects=200000", "--seconds=1", "--clients=1",
                                f"--kv_events={ev}"], capture_output=True, text=True,
                               timeout=600)
            m = re.search(r"fill[^\n]*?([\d.]+)\s*objects/s", r.stdout + r.stderr)
            if not m:
                raise RuntimeError(f"mc_master_bench said:\n{r.stdout}{r.stderr}")
            out[ev].append(float(m.group(1)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--master-bench", help="path of mc_master_bench: also put rate, events "
                    "off vs on")
    ap.add_argument("--lookup-bench", help="path of conductor_lookup_bench: also the in-process "
                    "limit in C")
    ap.add_argument("--ingest-events", type=int, default=5000,
                    help="events each publisher sends in the ingest-limit cases")
    ap.add_argument("--runs", type=int, default=3, help="alternating mc_master_bench runs")
    a = ap.parse_args()
    cases = [(L, 2, 1) for L in (2048, 8192, 32768)]
    cases += [(8192, n, 1) for n in (1, 8, 32)]
    cases += [(8192, 2, t) for t in (4, 16)]
    print(f"conductor /query and ingest, block size {BS}, {a.queries} queries a case, "
          f"{os.cpu_count()} CPUs\n")
    print("| tokens | instances | tenants | blocks ingested | ingest blocks/s | events/s | "
          "/query p50 ms | /query p99 ms | GET /health p50 ms | in-process Python p50 ms | "
          "in-process C p50 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for L, n, t in cases:
        r = run_case(L, n, t, a.queries)
        c_ms = f"{c_lookup(a.lookup_bench, L, n, a.queries):.2f}" if a.lookup_bench else "-"
        print(f"| {r['tokens']} | {r['instances']} | {r['tenants']} | {r['blocks']} | "
              f"{r['ingest_blocks_s']:.0f} | {r['ingest_events_s']:.0f} | {r['p50_ms']:.2f} | "
              f"{r['p99_ms']:.2f} | {r['health_p50_ms']:.2f} | {r['local_p50_ms']:.2f} | "
              f"{c_ms} |", flush=True)
    print("\ningest limit: pre-encoded batches of 64 block hashes, one event each\n")
    print("| publishers | blocks | conductor blocks/s | publisher send-only blocks/s | lost |")
    print("|---|---|---|---|---|")
    for n in (1, 4):
        r = ingest_case(n, a.ingest_events)
        print(f"| {r['publishers']} | {r['blocks']} | {r['blocks_s']:.0f} | "
              f"{r['send_blocks_s']:.0f} | {r['lost']} |", flush=True)
    if a.master_bench:
        res = master_bench(a.master_bench, a.runs)
        print("\nmc_master_bench --objects=200000 --seconds=1 --clients=1, fill objects/s\n")
        print("| events | runs | median |\n|---|---|---|")
        for ev in (0, 1):
            print(f"| {'on' if ev else 'off'} | {', '.join(f'{x:.0f}' for x in res[ev])} | "
                  f"{statistics.median(res[ev]):.0f} |")


if __name__ == "__main__":
    main()
