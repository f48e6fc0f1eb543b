"""Transfer Engine worker for the comparison harness.

Run by any interpreter that has a ``mooncake.engine`` (ours or the reference): the harness passes
the interpreter, so one script drives both implementations through the same Python API. Stdlib only
besides ``mooncake``.

Two roles, two processes:

* ``target``: initialises an engine, allocates one engine-managed buffer, prints one JSON line
  ``{"ready": ..., "session": ..., "addr": ..., "size": ...}`` and serves until stdin closes.
* ``initiator``: initialises an engine, allocates its own buffer, verifies one round trip by content,
  then runs each workload of ``--workloads`` (JSON list of ``{op, block, threads, duration}``) and
  prints one JSON line per workload with the op count, bytes, wall time and latency percentiles.

Each thread moves blocks between its own slice of the local and of the remote buffer (``--span``
bytes, at least the largest block; successive calls walk through it) with ``transfer_sync_write`` /
``transfer_sync_read``, one block per call, for ``duration`` seconds (and at least ``min_ops``
calls); latency is the time of each call.
"""

import argparse
import ctypes
import json
import os
import sys
import threading
import time

from worker_io import emit, percentiles


def make_engine(args):
    from mooncake.engine import TransferEngine

    eng = TransferEngine()
    rc = eng.initialize(args.hostname, args.metadata, args.protocol, args.device)
    if rc != 0:
        raise RuntimeError(f"TransferEngine.initialize({args.protocol!r}) returned {rc}")
    return eng


def alloc(eng, size):
    addr = eng.allocate_managed_buffer(size)
    if not addr:
        raise RuntimeError(f"allocate_managed_buffer({size}) failed")
    # Fault every page in now, untimed, on both sides: first-touch costs are not transfer costs.
    ctypes.memset(addr, 0, size)
    return addr


def run_target(args):
    eng = make_engine(args)
    addr = alloc(eng, args.size)
    port = eng.get_rpc_port()
    emit({"ready": True, "session": f"{args.hostname}:{port}", "addr": addr, "size": args.size,
          "pid": os.getpid()})
    # Serve until the harness closes our stdin; the engine works on its own threads.
    sys.stdin.read()
    eng.free_managed_buffer(addr, args.size)
    return 0


def verify(eng, session, laddr, raddr, n):
    """One write then one read of a known pattern; a mismatch means the numbers would be lies."""
    pattern = bytes((i * 7 + 13) & 0xFF for i in range(256)) * (n // 256)
    eng.write_bytes_to_buffer(laddr, pattern, n)
    rc = eng.transfer_sync_write(session, laddr, raddr, n)
    if rc != 0:
        raise RuntimeError(f"verify: transfer_sync_write returned {rc}")
    eng.write_bytes_to_buffer(laddr, b"\0" * n, n)
    rc = eng.transfer_sync_read(session, laddr, raddr, n)
    if rc != 0:
        raise RuntimeError(f"verify: transfer_sync_read returned {rc}")
    back = eng.read_bytes_from_buffer(laddr, n)
    if bytes(back) != pattern:
        raise RuntimeError("verify: data read back differs from data written")


def run_workload(eng, session, laddr, raddr, slot, w):
    op, block, threads = w["op"], int(w["block"]), int(w["threads"])
    duration, min_ops = float(w["duration"]), int(w.get("min_ops", 3))
    fn = eng.transfer_sync_write if op == "write" else eng.transfer_sync_read
    lats = [[] for _ in range(threads)]
    errors = []
    start = threading.Barrier(threads + 1)
    t_end = [0.0]

    positions = max(1, slot // block)

    def loop(tid):
        loc, rem = laddr + tid * slot, raddr + tid * slot
        # One untimed call per thread: connection setup is not steady-state throughput.
        rc = fn(session, loc, rem, block)
        if rc != 0:
            errors.append(rc)
        out = lats[tid]
        start.wait()
        clock = time.perf_counter_ns
        stop_at = t_end[0]
        i = 0
        while True:
            # Walk the thread's whole slot (at least --span bytes) so that blocks come from
            # memory, not from a cache that one block would stay hot in.
            off = (i % positions) * block
            i += 1
            t0 = clock()
            rc = fn(session, loc + off, rem + off, block)
            t1 = clock()
            if rc != 0:
                errors.append(rc)
                return
            out.append(t1 - t0)
            if t1 >= stop_at and len(out) >= min_ops:
                return

    ths = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in ths:
        t.start()
    t_end[0] = time.perf_counter_ns() + int(duration * 1e9)
    start.wait()
    t0 = time.perf_counter_ns()
    for t in ths:
        t.join()
    wall = (time.perf_counter_ns() - t0) / 1e9
    if errors:
        return {"error": f"transfer returned {errors[0]} ({len(errors)} failures)"}
    all_lat = [x for lst in lats for x in lst]
    ops = len(all_lat)
    return {"ops": ops, "bytes": ops * block, "wall_s": wall,
            "gbps": ops * block / wall / 1e9, "ops_per_s": ops / wall, **percentiles(all_lat)}


def run_initiator(args):
    workloads = json.loads(args.workloads)
    eng = make_engine(args)
    slot = max([int(w["block"]) for w in workloads] + [args.span])
    nthreads = max(int(w["threads"]) for w in workloads)
    size = slot * nthreads
    if size > args.remote_size:
        raise RuntimeError(f"remote buffer {args.remote_size} smaller than needed {size}")
    laddr = alloc(eng, size)
    verify(eng, args.target, laddr, args.remote_addr, min(size, 1 << 20))
    emit({"verified": True})
    for w in workloads:
        try:
            res = run_workload(eng, args.target, laddr, args.remote_addr, slot, w)
        except Exception as exc:  # report and carry on with the next workload
            res = {"error": f"{type(exc).__name__}: {exc}"}
        emit({"workload": w, "result": res})
    eng.free_managed_buffer(laddr, size)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("role", choices=["target", "initiator"])
    ap.add_argument("--protocol", default="tcp")
    ap.add_argument("--device", default="")
    ap.add_argument("--hostname", default="127.0.0.1")
    ap.add_argument("--metadata", default="P2PHANDSHAKE")
    ap.add_argument("--size", type=int, default=128 << 20, help="target buffer bytes")
    ap.add_argument("--target", help="target session name host:port")
    ap.add_argument("--remote-addr", type=int)
    ap.add_argument("--remote-size", type=int)
    ap.add_argument("--span", type=int, default=64 << 20,
                    help="initiator: bytes each thread cycles through (at least the largest block)")
    ap.add_argument("--workloads", default="[]")
    args = ap.parse_args(argv)
    try:
        return run_target(args) if args.role == "target" else run_initiator(args)
    except Exception as exc:
        emit({"fatal": f"{type(exc).__name__}: {exc}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
