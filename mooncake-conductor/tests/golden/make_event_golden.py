#!/usr/bin/env python3
"""Writes the conductor decoder's golden payloads (mooncake-conductor/tests/golden/*.msgpack),
read by tests/test_kv_event_decode.c, which hard-codes the values below.

vllm_*.msgpack are made by vLLM's own event classes and encoder: pass the path of
vllm/distributed/kv_events.py from a vLLM checkout or sdist (its imports of the rest of vLLM are
stubbed; msgspec and pyzmq must be installed). sglang_array.msgpack uses SGLang's array layout
(tagged array_like structs, attn_dp_rank) through msgspec, and master.msgpack the Mooncake
master's map layout (docs/kv-events.md) through msgpack.

    python3 make_event_golden.py --vllm-kv-events /path/to/vllm/distributed/kv_events.py
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
    }
    stubs["vllm.config.kv_events"].KVEventsConfig = object
    stubs["vllm.logger"].init_logger = logging.getLogger
    stubs["vllm.v1.core.kv_cache_utils"].ExternalBlockHash = bytes | int
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
    args = ap.parse_args()
    files = {}
    files.update(vllm_batches(load_vllm_events(args.vllm_kv_events)))
    files.update(sglang_batch())
    files.update(master_batch())
    for name, data in files.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        print(name, len(data))


if __name__ == "__main__":
    main()
