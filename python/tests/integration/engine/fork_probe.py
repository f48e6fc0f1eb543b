"""A TransferEngine across fork(), in a process of its own (test_engine_fork.py drives it line by
line; the test process never forks). It prints ``READY <segment> <buffer address>``, then answers:

    FORK <peer segment> <peer buffer address>   fork; parent and child both write to and read back
                                                 from the peer at once through the engine; the child
                                                 then closes and drops its copy (del + gc), starts
                                                 an engine of its own, and exits normally. One JSON
                                                 line: what each saw.
    SHA <offset> <length>                        sha256 of our buffer's bytes there
    QUIT
"""

import gc
import hashlib
import json
import os
import random
import sys
import time

from mooncake.engine import TransferEngine

KiB = 1 << 10
SIZE = 64 * KiB
ROUNDS = 200
BUF = 1 << 20
CHILD_DEADLINE_S = 60.0


def pattern(seed, n):
    return random.Random(seed).randbytes(n)


def start_engine():
    e = TransferEngine()
    rc = e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
    if rc != 0:
        raise RuntimeError(f"initialize returned {rc}")
    buf = e.allocate_managed_buffer(BUF)
    if buf == 0:
        raise RuntimeError("allocate_managed_buffer failed")
    return e, buf


def rounds(e, buf, peer, peer_addr, slot, seed0, n=ROUNDS):
    """n round trips through [slot, slot+SIZE) of the peer's buffer: write ours there, read it
    back into another part of ours, compare. Codes seen and wrong read-backs."""
    out = {"rounds": n, "codes": {}, "wrong": 0, "secs": 0.0}
    t0 = time.monotonic()
    for i in range(n):
        data = pattern(seed0 + i, SIZE)
        e.write_bytes_to_buffer(buf, data, SIZE)
        e.write_bytes_to_buffer(buf + SIZE, b"\0" * SIZE, SIZE)
        w = e.transfer_sync_write(peer, buf, peer_addr + slot, SIZE)
        r = e.transfer_sync_read(peer, buf + SIZE, peer_addr + slot, SIZE)
        for rc in (w, r):
            out["codes"][str(rc)] = out["codes"].get(str(rc), 0) + 1
        if w == 0 and r == 0 and e.read_bytes_from_buffer(buf + SIZE, SIZE) != data:
            out["wrong"] += 1
    out["secs"] = round(time.monotonic() - t0, 3)
    return out


def child_side(e, buf, peer, peer_addr):
    res = {"rounds": rounds(e, buf, peer, peer_addr, 4 * SIZE, 10_000)}
    t0 = time.monotonic()
    res["other_calls"] = {
        "register_memory": e.register_memory(buf, 4096, "cpu:0"),
        "unregister_memory": e.unregister_memory(buf),
        "allocate_managed_buffer": e.allocate_managed_buffer(4096),
        "get_first_buffer_address": e.get_first_buffer_address(peer),
    }
    res["other_secs"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    e.close()
    del e
    gc.collect()
    res["release_secs"] = round(time.monotonic() - t0, 3)
    own, own_buf = start_engine()
    res["own_rounds"] = rounds(own, own_buf, peer, peer_addr, 8 * SIZE, 20_000, 50)
    own.close()
    return res


def wait_child(pid, deadline_s):
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


def fork_case(e, buf, peer, peer_addr):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = child_side(e, buf + 4 * SIZE, peer, peer_addr)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            res = {"error": repr(exc)}
        os.write(w, json.dumps(res).encode())
        os.close(w)
        sys.exit(0)
    os.close(w)
    out = {"during": rounds(e, buf, peer, peer_addr, 0, 0)}
    raw = read_all(r, CHILD_DEADLINE_S)
    os.close(r)
    out["child_exit"] = wait_child(pid, CHILD_DEADLINE_S)
    out["child"] = json.loads(raw) if raw else None
    out["after"] = rounds(e, buf, peer, peer_addr, 0, 5_000)
    return out


def main():
    e, buf = start_engine()
    print(f"READY {e.get_local_segment_name()} {buf}", flush=True)
    for line in sys.stdin:
        cmd, *a = line.split()
        if cmd == "FORK":
            print(json.dumps(fork_case(e, buf, a[0], int(a[1]))), flush=True)
        elif cmd == "SHA":
            data = e.read_bytes_from_buffer(buf + int(a[0]), int(a[1]))
            print("OK " + hashlib.sha256(data).hexdigest(), flush=True)
        elif cmd == "QUIT":
            e.close()
            print("OK bye", flush=True)
            return


if __name__ == "__main__":
    main()
