"""One thread's small synchronous Transfer Engine calls, for syscall and wake-up counts.

Starts a target engine in a child process (tcp, P2PHANDSHAKE, 1 MiB registered), then times N
calls of ``transfer_sync_write`` (or read) of --size bytes from this process to it, one at a
time, and prints the mean time per call. Run under ``strace -c -f`` or ``perf stat`` to count
what one call costs (docs/performance.md, "Wake-ups on the one-thread small-request path").

    python benchmarks/te_small_calls.py --calls 20000 --size 4096
"""

import argparse
import ctypes
import subprocess
import sys
import time


def engine():
    from mooncake.engine import TransferEngine
    e = TransferEngine()
    if e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
        raise SystemExit("engine initialize failed")
    buf = (ctypes.c_ubyte * (1 << 20))()
    if e.register_memory(ctypes.addressof(buf), 1 << 20) != 0:
        raise SystemExit("register_memory failed")
    return e, buf


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--size", type=int, default=4096, help="bytes per call (<= 1 MiB)")
    p.add_argument("--op", choices=["write", "read"], default="write")
    p.add_argument("--_target", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._target:
        e, buf = engine()
        print(e.get_rpc_port(), ctypes.addressof(buf), flush=True)
        sys.stdin.read()
        return
    if not 0 < a.size <= 1 << 20:
        raise SystemExit("--size must be in 1..1048576")
    target = subprocess.Popen([sys.executable, __file__, "--_target"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port, raddr = map(int, target.stdout.readline().split())
        e, buf = engine()
        call = e.transfer_sync_write if a.op == "write" else e.transfer_sync_read
        peer, local = f"127.0.0.1:{port}", ctypes.addressof(buf)
        for _ in range(100):  # connect and warm up, untimed
            call(peer, local, raddr, a.size)
        t0 = time.perf_counter()
        for _ in range(a.calls):
            if call(peer, local, raddr, a.size) != 0:
                raise SystemExit("a transfer failed")
        dt = time.perf_counter() - t0
        print(f"{a.calls} x {a.size}-byte transfer_sync_{a.op}: {dt:.3f} s, "
              f"{dt / a.calls * 1e6:.1f} us per call")
    finally:
        target.stdin.close()
        target.wait(timeout=10)


if __name__ == "__main__":
    main()
