"""A store across fork(), run as its own process by test_store_fork.py (the test process itself
never forks). Prints one JSON line: what the parent and the child saw.

    fork_probe.py fork  dummy|direct ADDR   set up, fork; parent and child both put/get their
                                             own keys at once, then the child drops its copy
                                             (del + gc), sets up a store of its own and exits
                                             normally (interpreter finalization runs)
    fork_probe.py pool  dummy|direct ADDR   multiprocessing's fork Pool: workers that use the
                                             inherited store, workers that set up their own

ADDR is the storage node's host:port (dummy) or the master's (direct)."""

import gc
import json
import multiprocessing
import os
import sys
import time

from mooncake.store import MooncakeDistributedStore

ROUNDS = 400
SIZE = 64 << 10
CHILD_DEADLINE_S = 60.0
STORE = None  # the parent's store, inherited by Pool workers


def value(key, seed):
    """SIZE bytes headed by the key, so a read of another key's bytes shows whose they are."""
    head = key.encode().ljust(64, b".")
    body = (f"{seed}:".encode() * (SIZE // 4 + 1))[:SIZE - len(head)]
    return head + body


def setup(kind, addr, segment=32 << 20):
    s = MooncakeDistributedStore()
    if kind == "dummy":
        rc = s.setup_dummy(1 << 30, 4 << 20, addr)
    else:
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, 4 << 20, "tcp", "", addr)
    if rc != 0:
        raise RuntimeError(f"setup {kind} returned {rc}")
    return s


def rounds(store, prefix, n=ROUNDS):
    """n puts and gets of this process's own keys: error codes, wrong reads and whose bytes a
    wrong read held."""
    out = {"ops": 0, "put_codes": {}, "empty_gets": 0, "wrong": 0, "foreign": 0, "secs": 0.0}
    t0 = time.monotonic()
    for i in range(n):
        key = f"{prefix}-{i}"
        v = value(key, i)
        rc = store.put(key, v)
        out["put_codes"][str(rc)] = out["put_codes"].get(str(rc), 0) + 1
        got = store.get(key)
        out["ops"] += 2
        if not got:
            out["empty_gets"] += 1
        elif got != v:
            out["wrong"] += 1
            if not got.startswith(prefix.encode()):
                out["foreign"] += 1
    out["secs"] = round(time.monotonic() - t0, 3)
    return out


def child_side(store, kind, addr, tag):
    res = {"rounds": rounds(store, f"c{tag}")}
    t0 = time.monotonic()
    res["other_calls"] = {
        "get_size": store.get_size("pre"),
        "is_exist": store.is_exist("pre"),
        "remove": store.remove("pre"),
        "health_check": store.health_check(),
        "close": store.close(),
        "setup_again": (store.setup_dummy(1 << 30, 4 << 20, addr) if kind == "dummy" else
                        store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 4 << 20, "tcp", "", addr)),
    }
    res["other_secs"] = round(time.monotonic() - t0, 3)
    # The child's copy goes here, as a child that drops it or exits would let it go.
    t0 = time.monotonic()
    del store
    gc.collect()
    res["release_secs"] = round(time.monotonic() - t0, 3)
    own = setup(kind, addr, segment=0 if kind == "direct" else 32 << 20)
    res["own_rounds"] = rounds(own, f"o{tag}", 50)
    res["own_close"] = own.close()
    return res


def wait_child(pid, deadline_s):
    """The child's exit status, or None when it did not exit in time (then it is killed)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def read_all(fd, deadline_s):
    data = b""
    os.set_blocking(fd, False)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        if not chunk:
            break
        data += chunk
    return data


def fork_case(kind, addr):
    store = setup(kind, addr)
    pre = value("pre", 7)
    assert store.put("pre", pre) == 0
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = child_side(store, kind, addr, os.getpid())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            res = {"error": repr(exc)}
        os.write(w, json.dumps(res).encode())
        os.close(w)
        sys.exit(0)  # a normal exit: finalization, atexit and module teardown run
    os.close(w)
    out = {"during": rounds(store, "p")}
    raw = read_all(r, CHILD_DEADLINE_S)
    os.close(r)
    out["child_exit"] = wait_child(pid, CHILD_DEADLINE_S)
    out["child"] = json.loads(raw) if raw else None
    out["after"] = rounds(store, "q")
    out["pre_intact"] = store.get("pre") == pre
    out["close"] = store.close()
    return out


def pool_inherited(i):
    rc = STORE.put(f"w-{i}", value(f"w-{i}", i))
    return {"put": rc, "get_empty": STORE.get("pre") == b"", "pid": os.getpid()}


def pool_own(args):
    kind, addr, i = args
    own = setup(kind, addr, segment=0 if kind == "direct" else 32 << 20)
    res = rounds(own, f"pw{i}-{os.getpid()}", 20)
    res["close"] = own.close()
    return res


def pool_case(kind, addr):
    global STORE
    STORE = setup(kind, addr)
    pre = value("pre", 9)
    assert STORE.put("pre", pre) == 0
    # "fork" is multiprocessing's default start method on Linux before Python 3.14; named here
    # so that the test means the same on every version.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        inherited = pool.map(pool_inherited, range(4), chunksize=1)
        own = pool.map(pool_own, [(kind, addr, i) for i in range(2)], chunksize=1)
    out = {"inherited": inherited, "own": own, "after": rounds(STORE, "pp"),
           "pre_intact": STORE.get("pre") == pre}
    out["close"] = STORE.close()
    return out


def main():
    case, kind, addr = sys.argv[1:4]
    out = fork_case(kind, addr) if case == "fork" else pool_case(kind, addr)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
