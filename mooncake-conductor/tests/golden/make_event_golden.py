#!/usr/bin/env python3
"""Writes the conductor decoder's golden payloads (mooncake-conductor/tests/golden/*.msgpack),
read by tests/test_kv_event_decode.c, which hard-codes the values below.

vllm_*.msgpack are made by vLLM's own event classes and encoder: pass the path of
vllm/distributed/kv_events.py from a vLLM checkout or sdist (its imports of the rest of vLLM are
stubbed; msgspec and pyzmq must be installed). sglang_array.msgpack uses SGLang's array layout
(tagged array_like structs, attn_dp_rank) through msgspec, and master.msgpack the Mooncake
master's map layout (docs/kv-events.md) through msgpack.

    python3 make_event_golden.py --vllm-kv-events /path/to/vllm/distributed/kv_events.py

vllm_e2e_*.msgpack are the batches the engines of python/tests/integration/store/test_conductor.py
publish: engine b's by vLLM 0.34.0's kv_events.py, engine a's (vllm_e2e_int_*) by vLLM 0.11.0's
(--older-vllm-kv-events), both taken from the wheels; --e2e-only writes just these.
"""
import argparse
import logging
import os
import sys
import types

import msgpack
import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
DIGEST_A = bytes(range(32))        # a SHA-256-sized block hash: its last 8 bytes count
DIGEST_B = bytes(range(32, 64))


def load_vllm_events(path):
    """vLLM's kv_events module, with vllm.* imports stubbed."""
    stubs = {
        "vllm": types.ModuleType("vllm"),
        "vllm.config": types.ModuleType("vllm.config"),
        "vllm.config.kv_events": types.ModuleType("vllm.config.kv_events"),
        "vllm.logger": types.ModuleType("vllm.logger"),
        "vllm.v1": types.ModuleType("vllm.v1"),
        "vllm.v1.core": types.ModuleType("vllm.v1.core"),
        "vllm.v1.core.kv_cache_utils": types.ModuleType("vllm.v1.core.kv_cache_utils"),
        "vllm.utils": types.ModuleType("vllm.utils"),
        "vllm.utils.network_utils": types.ModuleType("vllm.utils.network_utils"),
    }
    stubs["vllm.config.kv_events"].KVEventsConfig = object
    stubs["vllm.logger"].init_logger = logging.getLogger
    stubs["vllm.v1.core.kv_cache_utils"].ExternalBlockHash = bytes | int
    for name in ("get_ip", "get_tcp_uri", "is_valid_ipv6_address",
                 "split_zmq_path"):  # newer vLLMs' publisher helpers (unused here)
        setattr(stubs["vllm.utils.network_utils"], name, None)
    sys.modules.update(stubs)
    mod = types.ModuleType("vllm_kv_events")
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), mod.__dict__)
    return mod


def vllm_batches(ev):
    enc = msgspec.msgpack.Encoder()  # what ZmqEventPublisher encodes with
    stored = ev.BlockStored(block_hashes=[DIGEST_A, DIGEST_B], parent_block_hash=None,
                            token_ids=list(range(32)), block_size=16, lora_id=None,
                            medium="GPU", lora_name="adapter-1")
    chained = ev.BlockStored(block_hashes=[-5, 2**63 - 1], parent_block_hash=7,
                             token_ids=list(range(32)), block_size=16, lora_id=3,
                             medium=None, lora_name=None)
    removed = ev.BlockRemoved(block_hashes=[DIGEST_B], medium="CPU")
    batch = ev.KVEventBatch(ts=1700000000.5, events=[stored, chained, removed,
                                                     ev.AllBlocksCleared()],
                            data_parallel_rank=1)
    return {"vllm_batch.msgpack": enc.encode(batch)}


def sha256_cbor_chain(tokens, block_size, seed):
    """vLLM's sha256_cbor block digests for small token ids (CBOR heads written out), the chain
    rooted at sha256(cbor(seed)): the same digests the conductor's /query derives, whose last 8
    bytes hash_golden.json holds as vLLM's own hash code computed them."""
    import hashlib

    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        size = 1 if n < 1 << 8 else 2 if n < 1 << 16 else 4
        return bytes([major << 5 | {1: 24, 2: 25, 4: 26}[size]]) + n.to_bytes(size, "big")
    digest = hashlib.sha256(head(3, len(seed)) + seed.encode()).digest()
    out = []
    for b in range(len(tokens) // block_size):
        body = b"".join(head(0, t) for t in tokens[b * block_size:(b + 1) * block_size])
        digest = hashlib.sha256(b"\x83" + head(2, 32) + digest + head(4, block_size) + body +
                                b"\xf6").digest()
        out.append(digest)
    return out


def golden_case(bs):
    """hash_golden.json's vLLM request (sha256_cbor, seed "0", no LoRA or salt): its tokens and
    the block hashes vLLM's own code gave them."""
    import json
    with open(os.path.join(HERE, "hash_golden.json")) as f:
        return next(c for c in json.load(f)["cases"]
                    if (c["strategy"], c["algorithm"], c["seed"], c["block_size"],
                        c["lora_name"], c["cache_salt"]) == ("vllm_v1", "sha256_cbor", "0", bs,
                                                             "", ""))


def vllm_e2e_batches(ev):
    """What engine b of test_conductor.py's /query test publishes, encoded by vLLM's own event
    classes and encoder: GPU stores of blocks [0], [2] (its parent block 1) and [0, 1] of the
    hash_golden.json request (sha256_cbor, seed "0", 16-token blocks), full 32-byte digests."""
    bs = 16
    case = golden_case(bs)
    tokens = case["token_ids"]
    digests = sha256_cbor_chain(tokens, bs, "0")
    for d, h in zip(digests, case["hashes"]):
        assert int.from_bytes(d[-8:], "big") == int(h, 16), "digest does not match vLLM's"
    enc = msgspec.msgpack.Encoder()  # what ZmqEventPublisher encodes with

    def batch(first, n):
        stored = ev.BlockStored(block_hashes=digests[first:first + n],
                                parent_block_hash=digests[first - 1] if first else None,
                                token_ids=tokens[first * bs:(first + n) * bs], block_size=bs,
                                lora_id=None, medium="GPU", lora_name=None)
        return enc.encode(ev.KVEventBatch(ts=1700000000.0, events=[stored],
                                          data_parallel_rank=0))
    return {"vllm_e2e_store_0.msgpack": batch(0, 1), "vllm_e2e_store_2.msgpack": batch(2, 1),
            "vllm_e2e_store_01.msgpack": batch(0, 2)}


def vllm_e2e_int_batches(ev):
    """What engine a of the same test publishes, encoded by an older vLLM's classes (0.11.0:
    array events, 64-bit integer hashes): a GPU store of blocks [0, 1], then a GPU eviction of
    block 1."""
    bs = 16
    case = golden_case(bs)
    tokens, h = case["token_ids"], [int(x, 16) for x in case["hashes"]]
    # ExternalBlockHash is bytes | int; msgpack ints are at most 64 bits, signed past 2^63
    h = [x - (1 << 64) if x >= 1 << 63 else x for x in h]
    enc = msgspec.msgpack.Encoder()
    stored = ev.BlockStored(block_hashes=h[:2], parent_block_hash=None, token_ids=tokens[:2 * bs],
                            block_size=bs, lora_id=None, medium="GPU")
    removed = ev.BlockRemoved(block_hashes=h[1:2], medium="GPU")
    return {f"vllm_e2e_int_{name}.msgpack": enc.encode(ev.KVEventBatch(
        ts=1700000000.0, events=[e], data_parallel_rank=0))
        for name, e in (("store_01", stored), ("remove_1", removed))}


class SgEventBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list
    attn_dp_rank: int | None = None


class SgEvent(msgspec.Struct, array_like=True, gc=False, tag=True):
    pass


class BlockStored(SgEvent):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None


class BlockRemoved(SgEvent):
    block_hashes: list[int]
    medium: str | None = None


class AllBlocksCleared(SgEvent):
    pass


def sglang_batch():
    batch = SgEventBatch(ts=12.25, events=[
        BlockStored([11, 12, 13], 10, list(range(48)), 16, None, "CPU_PINNED"),
        BlockRemoved([12], "DISK"), AllBlocksCleared()], attn_dp_rank=2)
    return {"sglang_array.msgpack": msgspec.msgpack.encode(batch)}


def master_batch():
    def event(kind, key, medium):
        e = {"event_id": 1, "timestamp": 1700000000123, "event_type": kind,
             "type": "BlockStored" if kind == "stored" else "BlockRemoved", "model_name": None,
             "block_size": None, "additional_salt": None, "lora_name": None,
             "tenant_id": "default", "backend_id": "pool-a", "group_id": None,
             "medium": medium, "dp_rank": None, "object_key": key,
             "seq_hashes": [int(key)], "block_hashes": [int(key)]}
        e["base_block_idx"] = 0 if kind == "stored" else None
        return e
    events = [event("stored", "12345", "cpu"), event("removed", "99", "disk"),
              {"event_type": "stored", "seq_hashes": "not a list"}]  # malformed: counted
    return {"master.msgpack": msgpack.packb([1700000000123, events, 0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-kv-events", required=True)
    ap.add_argument("--e2e-only", action="store_true",
                    help="write only the end-to-end test's vllm_e2e_*.msgpack")
    ap.add_argument("--older-vllm-kv-events",
                    help="an older vLLM's kv_events.py (0.11.0): the test's engine a batches")
    args = ap.parse_args()
    files = {}
    ev = load_vllm_events(args.vllm_kv_events)
    files.update(vllm_e2e_batches(ev))
    if args.older_vllm_kv_events:
        for mod in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[mod]
        files.update(vllm_e2e_int_batches(load_vllm_events(args.older_vllm_kv_events)))
    if not args.e2e_only:
        files.update(vllm_batches(ev))
        files.update(sglang_batch())
        files.update(master_batch())
    for name, data in files.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        print(name, len(data))


if __name__ == "__main__":
    main()
