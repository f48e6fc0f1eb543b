"""Writes hash_golden.json: block hashes computed by the engines' own hash code, for
test_block_hash.c to check the conductor's C hashes against.

    python make_hash_golden.py --vllm-wheel vllm-*.whl --sglang-wheel sglang-*.whl \
        --sglang-legacy-wheel sglang-0.5.4-*.whl > hash_golden.json

The wheels are only read (pip download --no-deps), never installed: the hash code is loaded from
them as source, so neither torch nor a GPU is needed. Needs cbor2 and xxhash, which vLLM's hashing
module imports.

- vLLM: vllm/utils/hashing.py (sha256, sha256_cbor, xxhash, xxhash_cbor) run as a module, and
  hash_block_tokens taken from vllm/v1/core/kv_cache_utils.py. NONE_HASH is hash_fn(seed), as
  init_none_hash sets it when PYTHONHASHSEED is set. Extra keys are the conductor's contract (the
  reference's): (lora_name,) on every block, cache_salt after it on block 0.
- SGLang: the page chain of get_hash_str (sglang 0.5.4's mem_cache/hicache_storage.py, the pure
  Python form of today's native hash), published through hash_str_to_int64 (today's
  mem_cache/utils.py); and the legacy event hash of 0.5.4's radix_cache, hash(tuple(page)).
- XXH3 rolling: Dynamo's definition over the xxhash package (Dynamo's own code is Rust, not
  loaded here).
"""

import __future__
import argparse
import ast
import json
import sys
import types
import zipfile
from collections.abc import Callable, Sequence
from typing import Any, Optional

import xxhash

MASK = (1 << 64) - 1


def source(wheel, path):
    with zipfile.ZipFile(wheel) as z:
        return z.read(path).decode()


def functions(text, names, namespace):
    """Runs only the named top-level functions of a module's source in namespace."""
    tree = ast.parse(text)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in keep}
    if missing:
        sys.exit(f"not found: {missing}")
    code = compile(ast.Module(body=keep, type_ignores=[]), "<engine>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace


def tokens(n, salt):
    # every pickle integer width: < 256, < 65536 and larger, as a vocabulary spans them
    out, x = [], 0x9E3779B9 ^ salt
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK
        width = (0xFF, 0xFFFF, 0x3FFFF)[i % 3]
        out.append((x >> 33) & width)
    return out


def vllm_cases(wheel):
    hashing = types.ModuleType("vllm_hashing")
    exec(compile(source(wheel, "vllm/utils/hashing.py"), "hashing.py", "exec"), hashing.__dict__)
    cases = []
    for algo in ("sha256_cbor", "sha256", "xxhash_cbor", "xxhash"):
        fn = getattr(hashing, algo)
        for seed in ("0", "vllm-none-hash", "4294967295"):
            ns = {"BlockHash": bytes, "Any": Any, "Callable": Callable, "Sequence": Sequence,
                  "Optional": Optional, "NONE_HASH": fn(seed)}
            functions(source(wheel, "vllm/v1/core/kv_cache_utils.py"), ["hash_block_tokens"], ns)
            for bs, lora, salt in ((16, "", ""), (1, "", ""), (2, "adapter-a", ""), (3, "", "s"),
                                   (4, "adapter-a", "tenant-salt"), (16, "adapter-a", "")):
                toks = tokens(bs * 5 + bs // 2, len(cases))
                parent, out = None, []
                for b in range(len(toks) // bs):
                    extra = ([lora] if lora else []) + ([salt] if salt and b == 0 else [])
                    parent = ns["hash_block_tokens"](fn, parent, toks[b * bs:(b + 1) * bs],
                                                     tuple(extra) if extra else None)
                    out.append(int.from_bytes(parent[-8:], "big"))
                cases.append({"strategy": "vllm_v1", "algorithm": algo, "seed": seed,
                              "block_size": bs, "lora_name": lora, "cache_salt": salt,
                              "token_ids": toks, "hashes": out})
    return cases


def sglang_cases(wheel, legacy_wheel):
    ns = functions(source(legacy_wheel, "sglang/srt/mem_cache/hicache_storage.py"),
                   ["get_hash_str"], {"hashlib": __import__("hashlib"), "List": list})
    functions(source(wheel, "sglang/srt/mem_cache/utils.py"), ["hash_str_to_int64"], ns)
    cases = []
    for bs in (1, 16, 64):
        toks = tokens(bs * 6, bs)
        prior, out, legacy = None, [], []
        for b in range(len(toks) // bs):
            page = toks[b * bs:(b + 1) * bs]
            prior = ns["get_hash_str"](page, prior)
            out.append(ns["hash_str_to_int64"](prior) & MASK)
            legacy.append(hash(tuple(page)) & MASK)  # sglang 0.5.4 radix_cache's event hash
        cases.append({"strategy": "sglang", "algorithm": "sha256", "seed": "", "block_size": bs,
                      "lora_name": "", "cache_salt": "", "token_ids": toks, "hashes": out})
        cases.append({"strategy": "sglang", "algorithm": "python_hash", "seed": "",
                      "block_size": bs, "lora_name": "", "cache_salt": "", "token_ids": toks,
                      "hashes": legacy})
    return cases


def xxh3_cases():
    cases = []
    for bs in (1, 16, 32):
        toks = tokens(bs * 4, 7 * bs)
        seq, out = 0, []
        for b in range(len(toks) // bs):
            data = b"".join(t.to_bytes(4, "little") for t in toks[b * bs:(b + 1) * bs])
            block = xxhash.xxh3_64_intdigest(data, seed=1337)
            seq = block if b == 0 else xxhash.xxh3_64_intdigest(
                seq.to_bytes(8, "little") + block.to_bytes(8, "little"), seed=1337)
            out.append(seq)
        cases.append({"strategy": "xxh3_rolling", "algorithm": "xxh3_64", "seed": "",
                      "block_size": bs, "lora_name": "", "cache_salt": "", "token_ids": toks,
                      "hashes": out})
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-wheel", required=True)
    ap.add_argument("--sglang-wheel", required=True)
    ap.add_argument("--sglang-legacy-wheel", required=True)
    a = ap.parse_args()
    cases = vllm_cases(a.vllm_wheel) + sglang_cases(a.sglang_wheel, a.sglang_legacy_wheel)
    cases += xxh3_cases()
    projection = {"vllm_v1": "low64_be", "sha256": "high64_be", "python_hash": "i64",
                  "xxh3_64": "u64"}
    for c in cases:
        # hex text: JSON readers keep integers above 2^53 as doubles
        c["hashes"] = [f"{h:016x}" for h in c["hashes"]]
        c["index_projection"] = projection[c["strategy"] if c["strategy"] == "vllm_v1"
                                           else c["algorithm"]]
    names = {w: w.rsplit("/", 1)[-1] for w in (a.vllm_wheel, a.sglang_wheel, a.sglang_legacy_wheel)}
    json.dump({"generated_from": sorted(names.values()), "cases": cases}, sys.stdout, indent=None)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
