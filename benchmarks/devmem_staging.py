"""What staging device memory costs the tcp transport, on any host: two engines of this process
over loopback tcp, the initiator's buffer either host memory or the fake device-memory backend's
"GPU memory" (MC_DEVMEM=fake: every slice is copied to or from a pinned staging buffer by the
backend, with memcpy, before it is sent or after it is received). Prints GB/s of each beside
the host's single-thread memcpy measured in the same run (the fake's copy engine), so the
overhead of the staging pipeline reads against its own limit. A real GPU's figure needs a GPU
(docs/transfer-engine.md): this measures the pipeline, not a device.

    MC_LOG_LEVEL=error python benchmarks/devmem_staging.py [--size 64] [--rounds 5]
"""

import argparse
import ctypes
import json
import os
import time

os.environ["MC_DEVMEM"] = "fake"  # before the engines are created

from mooncake.engine import TransferEngine  # noqa: E402

MiB = 1 << 20


def buf(n):
    b = bytearray(n)
    return b, ctypes.addressof((ctypes.c_char * n).from_buffer(b))


def memcpy_gbps(n, secs=0.5):
    (a, pa), (b, pb) = buf(n), buf(n)
    moved, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        ctypes.memmove(pb, pa, n)
        moved += n
    return moved / (time.perf_counter() - t0) / 1e9


def transfer_gbps(e, target, local, remote, n, op, secs):
    fn = e.transfer_sync_write if op == "write" else e.transfer_sync_read
    moved, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        assert fn(target, local, remote, n) == 0
        moved += n
    return moved / (time.perf_counter() - t0) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64, help="MiB per transfer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=1.0, help="seconds per measurement")
    a = ap.parse_args()
    n = a.size * MiB
    tgt, ini = TransferEngine(), TransferEngine()
    for e in (tgt, ini):
        assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
    (rb, raddr) = buf(n)
    (hb, haddr), (db, daddr) = buf(n), buf(n)
    assert tgt.register_memory(raddr, n, "cpu:0") == 0
    assert ini.register_memory(haddr, n, "cpu:0") == 0
    assert ini.register_memory(daddr, n, "cuda:0") == 0  # the fake's GPU 0
    name = tgt.get_local_segment_name()
    rows = []
    for r in range(a.rounds):
        row = {"round": r + 1, "memcpy_gbps": memcpy_gbps(n)}
        for op in ("write", "read"):
            row[f"host_{op}_gbps"] = transfer_gbps(ini, name, haddr, raddr, n, op, a.duration)
            row[f"device_{op}_gbps"] = transfer_gbps(ini, name, daddr, raddr, n, op, a.duration)
        rows.append(row)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}),
              flush=True)
    best = {k: max(r[k] for r in rows) for k in rows[0] if k != "round"}
    print("best of %d rounds, %d MiB transfers, MC_TCP_WORKERS=%s MC_SLICE_SIZE=%s:" %
          (a.rounds, a.size, os.environ.get("MC_TCP_WORKERS", "default"),
           os.environ.get("MC_SLICE_SIZE", "default")))
    print("  memcpy (1 thread, the fake device's copy)  %.2f GB/s" % best["memcpy_gbps"])
    for op in ("write", "read"):
        h, d = best[f"host_{op}_gbps"], best[f"device_{op}_gbps"]
        print("  tcp %-5s host buffer %.2f GB/s, staged device buffer %.2f GB/s (%.0f%%)" %
              (op, h, d, 100.0 * d / h))
    ini.close()
    tgt.close()


if __name__ == "__main__":
    main()
