"""Store worker for the comparison harness.

Run by any interpreter that has a ``mooncake.store`` (ours or the reference), or, with
``--backend redis``, one that has ``redis`` (redis-py). Stdlib only besides those. The same
workloads and the same timing loop drive every backend.

Roles:

* ``holder``: a storage client that contributes ``--segment`` bytes to the pool, prints one JSON line
  ``{"ready": true}`` and stays until stdin closes (the second client process of the layout).
* ``driver``: a client that contributes no memory (``global_segment_size=0``), so every object lives
  in the holder's segment and every byte crosses processes. It runs each workload of
  ``--workloads`` (JSON list of ``{op, size, batch, zc, duration}``) and prints one JSON line per
  workload.

Workloads: ``op`` put or get; ``batch`` 1 (``put``/``get``, ``put_from``/``get_into``) or N
(``put_batch``/``get_batch``, ``batch_put_from``/``batch_get_into``; Redis: a pipeline of N
commands); ``zc`` true uses a buffer registered with ``register_buffer``. Puts write fresh keys from
a pool that fits in the segment and remove the pool (untimed, ``force=True``) when it is used up;
gets read a pool written beforehand. Latency is per call (a batch call counts ``batch`` ops).
"""

import argparse
import ctypes
import json
import os
import sys
import time

from worker_io import emit, percentiles


def pattern(size, seed):
    block = bytes(((i * 31 + seed * 17) & 0xFF) for i in range(4096))
    reps = size // len(block) + 1
    return (block * reps)[:size]


class Mooncake:
    name = "mooncake"

    def __init__(self, args, segment, local_buffer):
        from mooncake.store import MooncakeDistributedStore

        self.s = MooncakeDistributedStore()
        rc = self.s.setup(args.hostname, args.metadata, segment, local_buffer, args.protocol,
                          args.device, args.master)
        if rc != 0:
            raise RuntimeError(f"MooncakeDistributedStore.setup returned {rc}")
        self.registered = []

    # Plain: Python bytes in, bytes out.
    def put(self, keys, values):
        if len(keys) == 1:
            rc = self.s.put(keys[0], values[0])
        else:
            rc = self.s.put_batch(keys, values)
        return _check_put(rc)

    def get(self, keys, size):
        if len(keys) == 1:
            got = [self.s.get(keys[0])]
        else:
            got = self.s.get_batch(keys)
        return _check_sizes([len(g) for g in got], size)

    # Zero-copy: from and into a registered buffer.
    def register(self, ptr, size):
        rc = self.s.register_buffer(ptr, size)
        if rc != 0:
            raise RuntimeError(f"register_buffer returned {rc}")
        self.registered.append(ptr)

    def put_from(self, keys, ptrs, size):
        if len(keys) == 1:
            rc = self.s.put_from(keys[0], ptrs[0], size)
        else:
            rc = self.s.batch_put_from(keys, ptrs, [size] * len(keys))
        return _check_put(rc)

    def get_into(self, keys, ptrs, size):
        if len(keys) == 1:
            got = [self.s.get_into(keys[0], ptrs[0], size)]
        else:
            got = self.s.batch_get_into(keys, ptrs, [size] * len(keys))
        return _check_sizes(got, size)

    def remove(self, keys):
        rcs = self.s.batch_remove(keys, force=True)
        bad = [rc for rc in (rcs if isinstance(rcs, list) else [rcs]) if rc not in (0,)]
        if bad:
            for k in keys:  # one by one, so one odd key does not keep the pool full
                self.s.remove(k, force=True)

    def close(self):
        for p in self.registered:
            self.s.unregister_buffer(p)
        self.s.close()


class Redis:
    name = "redis"

    def __init__(self, args, segment, local_buffer):
        import redis

        self.r = redis.Redis(host=args.hostname, port=args.redis_port)
        self.r.ping()

    def put(self, keys, values):
        if len(keys) == 1:
            ok = [self.r.set(keys[0], values[0])]
        else:
            p = self.r.pipeline(transaction=False)
            for k, v in zip(keys, values):
                p.set(k, v)
            ok = p.execute()
        if not all(ok):
            return "SET failed"
        return None

    def get(self, keys, size):
        if len(keys) == 1:
            got = [self.r.get(keys[0])]
        else:
            p = self.r.pipeline(transaction=False)
            for k in keys:
                p.get(k)
            got = p.execute()
        return _check_sizes([len(g) if g is not None else -1 for g in got], size)

    def remove(self, keys):
        self.r.delete(*keys)

    def close(self):
        self.r.close()


def _check_put(rc):
    rcs = rc if isinstance(rc, list) else [rc]
    bad = [x for x in rcs if x != 0]
    return f"put returned {bad[0]}" if bad else None


def _check_sizes(got, size):
    bad = [g for g in got if g != size]
    return f"get returned {bad[0]} for a {size}-byte value" if bad else None


def pool_size(w, budget):
    size, batch = int(w["size"]), int(w["batch"])
    n = max(1, min(256, budget // size))
    n = max(batch, n - n % batch)
    return n


def run_workload(be, w, budget, tag, zc_buf, ready=None):
    op, size, batch = w["op"], int(w["size"]), int(w["batch"])
    zc, duration, min_ops = bool(w["zc"]), float(w["duration"]), int(w.get("min_ops", 3))
    if zc and not hasattr(be, "put_from"):
        return {"error": "zero-copy not supported by this backend"}
    npool = pool_size(w, budget)
    value = pattern(size, 1)
    ptrs = []
    if zc:
        base, cap = zc_buf
        if batch * size > cap:
            return {"error": f"zero-copy buffer {cap} smaller than {batch * size}"}
        ptrs = [base + i * size for i in range(batch)]
        for p in ptrs:
            ctypes.memmove(p, value, size)
    lat = []
    err = None
    rnd = [0]

    def keys_of(r):
        return [f"{tag}-{r}-{i}" for i in range(npool)]

    def put_keys(keys):
        if zc:
            return be.put_from(keys, ptrs[:len(keys)], size)
        return be.put(keys, [value] * len(keys))

    # Gets read a pool written here, untimed; one verified by content.
    if op == "get":
        pool = keys_of("g")
        for i in range(0, npool, batch):
            err = put_keys(pool[i:i + batch])
            if err:
                return {"error": f"preparing gets: {err}"}
        if zc:
            ctypes.memset(ptrs[0], 0, size)
            err = be.get_into(pool[:1], ptrs[:1], size)
            ok = err is None and ctypes.string_at(ptrs[0], size) == value
        else:
            ok = be.get(pool[:1], size) is None
            ok = ok and (be.r.get(pool[0]) if be.name == "redis" else be.s.get(pool[0])) == value
        if not ok:
            return {"error": "verify: value read back differs from value written"}

    if ready:
        ready()  # --sync: every driver process starts its timed loop at once
    clock = time.perf_counter_ns
    t_stop = clock() + int(duration * 1e9)
    busy = 0
    t_first = clock()
    while True:
        if op == "put":
            pool = keys_of(rnd[0])
        for i in range(0, npool, batch):
            keys = pool[i:i + batch]
            t0 = clock()
            if op == "put":
                err = put_keys(keys)
            elif zc:
                err = be.get_into(keys, ptrs[:len(keys)], size)
            else:
                err = be.get(keys, size)
            t1 = clock()
            if err:
                break
            lat.append(t1 - t0)
            busy += t1 - t0
            if t1 >= t_stop and len(lat) >= min_ops:
                break
        if err or (clock() >= t_stop and len(lat) >= min_ops):
            if op == "put":
                be.remove(pool)
            break
        if op == "put":
            be.remove(pool)  # untimed: keep the pool within the segment
            rnd[0] += 1
    wall = (clock() - t_first) / 1e9
    if op == "get":
        be.remove(keys_of("g"))
    if err:
        return {"error": err}
    ops = len(lat) * batch
    busy_s = busy / 1e9
    # Throughput counts the time spent inside the timed calls only (the untimed pool clean-up
    # between put rounds is left out); wall_s is kept for reference.
    return {"ops": ops, "calls": len(lat), "bytes": ops * size, "busy_s": busy_s, "wall_s": wall,
            "gbps": ops * size / busy_s / 1e9, "ops_per_s": ops / busy_s, **percentiles(lat)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("role", choices=["holder", "driver"])
    ap.add_argument("--backend", choices=["mooncake", "redis"], default="mooncake")
    ap.add_argument("--protocol", default="tcp")
    ap.add_argument("--device", default="")
    ap.add_argument("--hostname", default="127.0.0.1")
    ap.add_argument("--metadata", default="P2PHANDSHAKE")
    ap.add_argument("--master", default="127.0.0.1:50051")
    ap.add_argument("--redis-port", type=int, default=6379)
    ap.add_argument("--segment", type=int, default=256 << 20, help="holder: bytes contributed")
    ap.add_argument("--local-buffer", type=int, default=128 << 20)
    ap.add_argument("--pool-bytes", type=int, default=96 << 20,
                    help="driver: bytes of live objects a workload keeps at most")
    ap.add_argument("--workloads", default="[]")
    ap.add_argument("--sync", action="store_true",
                    help="driver: before each timed loop print {\"prepared\": n} and wait for a "
                         "line on stdin (the harness starts several drivers' loops together)")
    args = ap.parse_args(argv)
    try:
        if args.role == "holder":
            be = Mooncake(args, args.segment, 16 << 20)
            emit({"ready": True, "pid": os.getpid()})
            sys.stdin.read()
            be.close()
            return 0
        workloads = json.loads(args.workloads)
        cls = Redis if args.backend == "redis" else Mooncake
        be = cls(args, 0, args.local_buffer)
        zc_buf = None
        zc_need = max([int(w["size"]) * int(w["batch"]) for w in workloads if w.get("zc")] or [0])
        if zc_need and hasattr(be, "register"):
            raw = ctypes.create_string_buffer(zc_need)
            zc_buf = (ctypes.addressof(raw), zc_need)
            be.register(*zc_buf)
        emit({"ready": True, "pid": os.getpid()})
        for n, w in enumerate(workloads):
            ready = None
            if args.sync:
                def ready(n=n):
                    emit({"prepared": n})
                    if not sys.stdin.readline():
                        raise RuntimeError("the harness closed stdin before the start")
            try:
                res = run_workload(be, w, args.pool_bytes, f"w{n}-{os.getpid()}", zc_buf, ready)
            except Exception as exc:  # report and carry on with the next workload
                res = {"error": f"{type(exc).__name__}: {exc}"}
            emit({"workload": w, "result": res})
        be.close()
        return 0
    except Exception as exc:
        emit({"fatal": f"{type(exc).__name__}: {exc}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
