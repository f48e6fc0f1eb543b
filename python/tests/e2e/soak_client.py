"""One soak client: mixed put/get/exist/remove on a shared key space for a fixed time, checking
every byte it gets back. Values describe themselves (key, version, length, then a pattern of
those), so any process can verify any value without knowing who wrote it or which version won.

Prints one JSON line of counts at the end: operations, result codes per operation, bytes
verified, wrong bytes (must stay 0), and this process's peak RSS.

usage: soak_client.py MASTER_ADDR SECONDS SEED
"""

import collections
import hashlib
import json
import random
import resource
import struct
import sys
import time

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

HEADER = struct.Struct("<32sQQ")  # sha256(key), version, total length
SIZES = [4096, 16384, 65536, 262144, 1 << 20, 4 << 20]
KEYS = 400


def value_for(key, version, size):
    head = HEADER.pack(hashlib.sha256(key.encode()).digest(), version, size)
    seed = hashlib.sha256(f"{key}/{version}".encode()).digest() * 64  # 2 KiB
    reps, rest = divmod(size - len(head), len(seed))
    return head + seed * reps + seed[:rest]


def check(key, data):
    """Number of wrong bytes in a value returned for key (0 when it is one of key's values)."""
    if len(data) < HEADER.size:
        return len(data)
    digest, version, size = HEADER.unpack_from(data)
    if digest != hashlib.sha256(key.encode()).digest() or size != len(data):
        return len(data)
    want = value_for(key, version, size)
    if want == data:
        return 0
    return sum(1 for a, b in zip(want, data) if a != b) or len(data)


def main():
    master, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 << 20, "auto", "", master)
    if rc != 0:
        print(json.dumps({"setup": rc}))
        return 1
    codes = collections.defaultdict(collections.Counter)
    verified = wrong = 0
    version = seed << 32
    cfg1, cfg2 = ReplicateConfig(), ReplicateConfig()
    cfg2.replica_num = 2
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        key = f"soak-{rng.randrange(KEYS)}"
        op = rng.choices(["put", "get", "exist", "remove"], [4, 5, 1, 1])[0]
        if op == "put":
            version += 1
            data = value_for(key, version, rng.choice(SIZES))
            r = store.put(key, data, config=cfg2 if rng.random() < 0.3 else cfg1)
        elif op == "get":
            data = store.get(key)
            r = 0 if data else -704
            if data:
                bad = check(key, data)
                wrong += bad
                verified += len(data) - bad
        elif op == "exist":
            r = store.is_exist(key)
        else:
            r = store.remove(key)
        codes[op][str(r)] += 1
    store.close()
    print(json.dumps({"codes": codes, "verified_bytes": verified, "wrong_bytes": wrong,
                      "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
