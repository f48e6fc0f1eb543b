"""A Transfer Engine peer process driven over stdin/stdout, for the multi-process engine tests.

It initializes an engine, allocates one managed buffer and prints

    READY <segment_name> <buffer_address> <buffer_size>

then answers one line per command (``OK ...`` or ``ERR ...``). Checksums are SHA-256 of the
peer's own memory, read back by the peer itself, so a test never trusts the initiator's view.

    FILL <offset> <length> <seed>     fill buffer[offset:offset+length] with pattern(seed) -> OK <sha>
    SHA <offset> <length>             -> OK <sha of buffer[offset:offset+length]>
    RAWBUF <length> <seed>            allocate memory the engine does NOT know, filled -> OK <addr> <sha>
    SHAADDR <addr> <length>           -> OK <sha of that memory>
    NOTIFIES                          -> OK <json [[name, msg_hex], ...]> (drains the queue)
    SENDNOTIFY <target> <name> <hex>  -> OK <return code>
    WRITE <target> <off> <peer_addr> <length>   transfer_sync_write from buffer[off:] -> OK <rc>
    READ <target> <off> <peer_addr> <length>    transfer_sync_read into buffer[off:] -> OK <rc>
    STATS                             -> OK <json {"tcp": [tasks, bytes], "shm": ..., "local": ...}>
    LOOP <target> <off> <peer_addr> <length> <seconds>
                                      writes again and again in a thread until one fails or the
                                      time is up -> OK started
    LOOPDONE                          -> OK <writes done so far> (the loop goes on)
    LOOPWAIT                          -> OK <rc of the failing write, 0 if none> <writes done>
    QUIT                              close the engine and exit 0
"""

import argparse
import ctypes
import hashlib
import json
import random
import sys
import threading
import time


def pattern(seed: int, length: int) -> bytes:
    return random.Random(seed).randbytes(length)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--metadata", default="P2PHANDSHAKE")
    ap.add_argument("--protocol", default="tcp")
    ap.add_argument("--size", type=int, default=1 << 20)
    args = ap.parse_args()

    from mooncake.engine import TransferEngine, TransferNotify

    engine = TransferEngine()
    rc = engine.initialize(args.host, args.metadata, args.protocol, "")
    if rc != 0:
        print(f"ERR initialize {rc}", flush=True)
        return 1
    base = engine.allocate_managed_buffer(args.size)
    if base == 0:
        print("ERR allocate_managed_buffer", flush=True)
        return 1
    raw = []  # keeps RAWBUF memory alive
    loop = {}

    def write_loop(target, src, dst, n, seconds):
        end, done, rc = time.monotonic() + seconds, 0, 0
        while time.monotonic() < end:
            rc = engine.transfer_sync_write(target, src, dst, n)
            if rc != 0:
                break
            done += 1
            loop["done"] = done
        loop["result"] = (rc, done)
    print(f"READY {engine.get_local_segment_name()} {base} {args.size}", flush=True)

    for line in sys.stdin:
        cmd, *a = line.split()
        try:
            if cmd == "FILL":
                off, n, seed = int(a[0]), int(a[1]), int(a[2])
                data = pattern(seed, n)
                engine.write_bytes_to_buffer(base + off, data, n)
                reply = sha(engine.read_bytes_from_buffer(base + off, n))
            elif cmd == "SHA":
                reply = sha(engine.read_bytes_from_buffer(base + int(a[0]), int(a[1])))
            elif cmd == "RAWBUF":
                n, seed = int(a[0]), int(a[1])
                buf = ctypes.create_string_buffer(pattern(seed, n), n)
                raw.append(buf)
                reply = f"{ctypes.addressof(buf)} {sha(ctypes.string_at(buf, n))}"
            elif cmd == "SHAADDR":
                reply = sha(engine.read_bytes_from_buffer(int(a[0]), int(a[1])))
            elif cmd == "NOTIFIES":
                out = []
                for n in engine.get_notifies():
                    msg = n.msg.encode() if isinstance(n.msg, str) else bytes(n.msg)
                    out.append([n.name, msg.hex()])
                reply = json.dumps(out, separators=(",", ":"))
            elif cmd == "SENDNOTIFY":
                note = TransferNotify(a[1], bytes.fromhex(a[2]) if len(a) > 2 else b"")
                reply = str(engine.send_notify(a[0], note))
            elif cmd in ("WRITE", "READ"):
                op = engine.transfer_sync_write if cmd == "WRITE" else engine.transfer_sync_read
                reply = str(op(a[0], base + int(a[1]), int(a[2]), int(a[3])))
            elif cmd == "STATS":
                reply = json.dumps(engine.get_transport_stats(), separators=(",", ":"))
            elif cmd == "LOOP":
                loop.clear()
                loop["thread"] = threading.Thread(
                    target=write_loop,
                    args=(a[0], base + int(a[1]), int(a[2]), int(a[3]), float(a[4])), daemon=True)
                loop["thread"].start()
                reply = "started"
            elif cmd == "LOOPDONE":
                reply = "%d" % loop.get("done", 0)
            elif cmd == "LOOPWAIT":
                loop["thread"].join()
                reply = "%d %d" % loop["result"]
            elif cmd == "QUIT":
                engine.close()
                print("OK bye", flush=True)
                return 0
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as exc:  # report, keep serving: the test decides what is fatal
            print(f"ERR {type(exc).__name__}: {exc}", flush=True)
            continue
        print(f"OK {reply}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
