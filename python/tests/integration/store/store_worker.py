"""A store client in its own process, driven by the test over stdin/stdout (one JSON line each).

Each request is {"code": "<python statements>"}; the code runs with ``store`` (the
MooncakeDistributedStore), ``ns`` (a dict kept between requests) and helpers in scope, and sets
``result`` to something JSON can carry. The reply is {"ok": true, "result": ...} or
{"ok": false, "error": "..."}. This is test plumbing only: the client under test is the real one.
"""

import ctypes
import hashlib
import json
import os
import sys
import threading
import traceback

from mooncake.store import MooncakeDistributedStore, ReplicateConfig


def pattern(size, seed):
    """Deterministic bytes (so two processes can agree on content without sending it)."""
    block = hashlib.sha256(f"{seed}".encode()).digest() * 2048  # 64 KiB
    reps, rest = divmod(size, len(block))
    return block * reps + block[:rest]


def sha(data):
    return hashlib.sha256(bytes(data)).hexdigest()


def main():
    store = MooncakeDistributedStore()
    ns = {}
    env = {"store": store, "ns": ns, "ReplicateConfig": ReplicateConfig, "pattern": pattern,
           "sha": sha, "ctypes": ctypes, "threading": threading, "os": os,
           "hashlib": hashlib}
    print(json.dumps({"ok": True, "result": os.getpid()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        scope = dict(env)
        try:
            exec(req["code"], scope)
            reply = {"ok": True, "result": scope.get("result")}
        except BaseException:  # noqa: BLE001 - reported to the test, which fails on it
            reply = {"ok": False, "error": traceback.format_exc()}
        try:
            text = json.dumps(reply)
        except TypeError:
            text = json.dumps({"ok": False, "error": f"result not JSON: {reply['result']!r:.200}"})
        print(text, flush=True)


if __name__ == "__main__":
    main()
