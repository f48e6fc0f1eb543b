"""mooncake_store_bench: throughput and latency of the Store through the public Python facade.

Without --master it starts its own ``mooncake_master`` and one storage client process (which
holds every object), so data always moves between two processes; the bench process itself is a
pure client (global_segment_size=0). Beside the results it measures, in the same run, the host's
single-thread memcpy and single-stream loopback TCP limits for the same value size and prints the
results as ratios of them.
"""

import argparse
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text):
    m = _SIZE_RE.match(str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 64kb, 1mb)")
    unit = (m.group(2) or "").lower().rstrip("b").rstrip("i")
    return int(m.group(1)) * _UNITS[unit]


def positive(kind):
    def conv(text):
        v = kind(text)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return v
    return conv


def build_parser():
    p = argparse.ArgumentParser(prog="mooncake_store_bench", description=__doc__.splitlines()[0])
    p.add_argument("--value_size", type=parse_size, default=1 << 20, help="bytes per object")
    p.add_argument("--batch", type=positive(int), default=1, help="keys per call")
    p.add_argument("--threads", type=positive(int), default=1, help="client threads")
    p.add_argument("--operation", choices=["put", "get", "mixed", "upsert"], default="get")
    p.add_argument("--zero_copy", action="store_true",
                   help="put_from/get_into with registered buffers instead of bytes")
    p.add_argument("--protocol", choices=["tcp", "shm"], default="tcp")
    p.add_argument("--duration", type=positive(float), default=5.0, help="seconds")
    p.add_argument("--master", default="", help="host:port of a running master (with storage "
                   "clients); default: start a master and a storage client here")
    p.add_argument("--segment_size", type=parse_size, default=512 << 20,
                   help="global segment of the storage client this bench starts")
    p.add_argument("--local_buffer_size", type=parse_size, default=64 << 20)
    p.add_argument("--keys", type=positive(int), default=0,
                   help="distinct objects read by get (default: fill half the segment, <= 256)")
    p.add_argument("--no_limits", action="store_true", help="skip the memcpy/TCP measurements")
    p.add_argument("--json", action="store_true", help="also print one JSON line of results")
    p.add_argument("--master_flag", action="append", default=[], metavar="FLAG",
                   help="a flag for the master this bench starts (repeatable), e.g. "
                        "--master_flag=--metadata_dir=/tmp/mc-meta")
    p.add_argument("--_storage_node", default="", help=argparse.SUPPRESS)
    return p


# ---- processes -------------------------------------------------------------------------------

def start_master(extra=()):
    from mooncake.cli import binary_path
    proc = subprocess.Popen([binary_path("mooncake_master"), "--port=0", "--metrics_port=0",
                             "--rpc_address=127.0.0.1", "--default_kv_lease_ttl=1000",
                             "--enable_metric_reporting=false",  # nobody reads the pipe
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on rpc ([\d.]+:\d+)", line)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("mooncake_master did not start")


def start_storage_node(master, args):
    cmd = [sys.executable, "-m", "mooncake.cli.store_bench", f"--_storage_node={master}",
           f"--segment_size={args.segment_size}", f"--protocol={args.protocol}"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("ready"):
        proc.kill()
        raise RuntimeError(f"storage client did not start: {line!r}")
    return proc, line.split()[1]


def storage_node_main(args):
    """Hidden mode: contribute a segment and wait until the bench closes our stdin."""
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", args.segment_size, 0, args.protocol, "",
                     args._storage_node)
    print(f"ready {store.get_hostname()}" if rc == 0 else f"setup failed {rc}", flush=True)
    if rc != 0:
        return 1
    sys.stdin.read()
    store.close()
    return 0


# ---- limits ----------------------------------------------------------------------------------

def limits_from_tool(block, seconds):
    from mooncake.cli import binary_path
    try:
        tool = binary_path("mc_limits")
    except FileNotFoundError:
        return None
    buf = max(64 << 20, block * 4)
    r = subprocess.run([tool, f"--block_size={block}", f"--buffer_size={buf}",
                        f"--duration={seconds}", "--json"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        return None
    d = json.loads(r.stdout)
    return {"memcpy": d["memcpy_gbps"], "tcp": d["tcp_pump_gbps"], "source": "mc_limits"}


def limits_in_python(block, seconds):
    """Fallback without mc_limits: ctypes.memmove of value-sized blocks, and a loopback pump."""
    n = max(64 << 20, block * 4)
    src = (ctypes.c_char * n)()
    dst = (ctypes.c_char * n)()
    ctypes.memset(src, 1, n)
    done, off, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if off + block > n:
            off = 0
        ctypes.memmove(ctypes.addressof(dst) + off, ctypes.addressof(src) + off, block)
        off += block
        done += block
    mem = done / (time.perf_counter() - t0) / 1e9

    a, b = _tcp_pair()
    payload = memoryview(bytearray(block))
    got = [0]

    def recv():
        sink = bytearray(1 << 20)
        while True:
            k = b.recv_into(sink)
            if not k:
                return
            got[0] += k

    t = threading.Thread(target=recv)
    t.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a.sendall(payload)
    a.shutdown(socket.SHUT_WR)
    t.join()
    tcp = got[0] / (time.perf_counter() - t0) / 1e9
    a.close()
    b.close()
    return {"memcpy": mem, "tcp": tcp, "source": "python"}


def _tcp_pair():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    ls.close()
    return a, b


# ---- the benchmark ---------------------------------------------------------------------------

class Worker(threading.Thread):
    def __init__(self, store, args, tid, keys, stop_at):
        super().__init__(daemon=True)
        self.store, self.args, self.tid, self.keys, self.stop_at = store, args, tid, keys, stop_at
        self.lat, self.ops, self.bytes, self.errors = [], 0, 0, 0
        self.error_codes = {}
        n = args.batch * args.value_size
        self.buf = (ctypes.c_char * max(n, 1))()
        self.addr = ctypes.addressof(self.buf)
        ctypes.memset(self.addr, 0x5A, n)
        self.value = bytes(args.value_size)
        if args.zero_copy:
            rc = store.register_buffer(self.addr, n)
            if rc != 0:
                raise RuntimeError(f"register_buffer failed: {rc}")
        self.seq = 0

    def _err(self, code):
        self.errors += 1
        self.error_codes[code] = self.error_codes.get(code, 0) + 1

    def do_get(self):
        a, s = self.args, self.store
        ks = [self.keys[(self.seq * a.batch + i + self.tid * 7) % len(self.keys)]
              for i in range(a.batch)]
        self.seq += 1
        t0 = time.perf_counter()
        if a.zero_copy:
            if a.batch == 1:
                res = [s.get_into(ks[0], self.addr, a.value_size)]
            else:
                res = s.batch_get_into(ks, [self.addr + i * a.value_size for i in range(a.batch)],
                                       [a.value_size] * a.batch)
            ok = [r == a.value_size for r in res]
        else:
            if a.batch == 1:
                vals = [s.get(ks[0])]
            else:
                vals = s.get_batch(ks)
            ok = [len(v) == a.value_size for v in vals]
            res = [len(v) for v in vals]
        return t0, ok, res

    def do_put(self, upsert=False):
        """put: new keys each call (removed afterwards, untimed, so the segment never fills);
        upsert: the same keys every call, each upsert replacing the value the last one wrote."""
        a, s = self.args, self.store
        if upsert:
            ks = [f"bench-upsert-{os.getpid()}-{self.tid}-{i}" for i in range(a.batch)]
            one, one_from = s.upsert, s.upsert_from
            many, many_from = s.upsert_batch, s.batch_upsert_from
        else:
            ks = [f"bench-put-{os.getpid()}-{self.tid}-{self.seq}-{i}" for i in range(a.batch)]
            one, one_from, many, many_from = s.put, s.put_from, s.put_batch, s.batch_put_from
        self.seq += 1
        t0 = time.perf_counter()
        if a.zero_copy:
            if a.batch == 1:
                res = [one_from(ks[0], self.addr, a.value_size)]
            else:
                res = many_from(ks, [self.addr + i * a.value_size for i in range(a.batch)],
                                [a.value_size] * a.batch)
        else:
            if a.batch == 1:
                res = [one(ks[0], self.value)]
            else:
                rc = many(ks, [self.value] * a.batch)
                res = [rc] * a.batch
        t1 = time.perf_counter()
        if not upsert:
            s.batch_remove(ks, force=True)
        return t0, [r == 0 for r in res], res, t1

    def run(self):
        op = self.args.operation
        while time.perf_counter() < self.stop_at:
            use_get = op == "get" or (op == "mixed" and self.seq % 2 == 0)
            if use_get:
                t0, ok, res = self.do_get()
                t1 = time.perf_counter()
            else:
                t0, ok, res, t1 = self.do_put(upsert=op == "upsert")
            self.lat.append(t1 - t0)
            for good, r in zip(ok, res):
                if good:
                    self.ops += 1
                    self.bytes += self.args.value_size
                else:
                    self._err(r)


def percentile(sorted_vals, q):
    if not sorted_vals:
        return 0.0
    i = min(len(sorted_vals) - 1, int(q * len(sorted_vals)))
    return sorted_vals[i]


def run_bench(args, master):
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, args.local_buffer_size, args.protocol, "",
                     master)
    if rc != 0:
        raise RuntimeError(f"setup against {master} failed: {rc}")
    keys = []
    if args.operation in ("get", "mixed"):
        n = args.keys or max(1, min(256, (args.segment_size // 2) // args.value_size))
        n = max(n, 1)
        value = bytes(range(256)) * (args.value_size // 256) + bytes(args.value_size % 256)
        for i in range(n):
            k = f"bench-get-{os.getpid()}-{i}"
            rc = store.put(k, value)
            if rc != 0:
                raise RuntimeError(f"preloading {k} failed: {rc} (segment too small?)")
            keys.append(k)
    stop_at = time.perf_counter() + args.duration
    workers = [Worker(store, args, t, keys, stop_at) for t in range(args.threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if keys:
        store.batch_remove(keys, force=True)
    store.close()
    lat = sorted(x for w in workers for x in w.lat)
    errs = {}
    for w in workers:
        for k, v in w.error_codes.items():
            errs[k] = errs.get(k, 0) + v
    return {
        "ops": sum(w.ops for w in workers),
        "ops_per_s": sum(w.ops for w in workers) / elapsed,
        "gbps": sum(w.bytes for w in workers) / elapsed / 1e9,
        "p50_us": percentile(lat, 0.50) * 1e6,
        "p99_us": percentile(lat, 0.99) * 1e6,
        "p999_us": percentile(lat, 0.999) * 1e6,
        "calls": len(lat),
        "errors": sum(w.errors for w in workers),
        "error_codes": errs,
        "seconds": elapsed,
    }


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args._storage_node:
        return storage_node_main(args)
    procs = []
    try:
        master = args.master
        where = master
        if not master:
            mproc, master = start_master(args.master_flag)
            procs.append(mproc)
            nproc, seg = start_storage_node(master, args)
            procs.append(nproc)
            where = f"own master {master}, storage client {seg} (pid {nproc.pid})"
        res = run_bench(args, master)
        lim = None
        if not args.no_limits:
            lim = limits_from_tool(args.value_size, 1.0) or limits_in_python(args.value_size, 1.0)
    except (RuntimeError, OSError) as exc:
        print(f"mooncake_store_bench: {exc}", file=sys.stderr)
        return 1
    finally:
        for p in reversed(procs):
            if p.stdin:
                p.stdin.close()
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    print(f"mooncake_store_bench: {args.operation} value_size={args.value_size} "
          f"batch={args.batch} threads={args.threads} zero_copy={int(args.zero_copy)} "
          f"protocol={args.protocol} duration={args.duration:g}s ({where})")
    print(f"  ops/s {res['ops_per_s']:.1f}   GB/s {res['gbps']:.3f}   "
          f"latency per call p50 {res['p50_us']:.1f} us  p99 {res['p99_us']:.1f} us  "
          f"p999 {res['p999_us']:.1f} us   calls {res['calls']}  errors {res['errors']}"
          + (f" {res['error_codes']}" if res["errors"] else ""))
    if lim:
        res["memcpy_gbps"], res["tcp_gbps"] = lim["memcpy"], lim["tcp"]
        print(f"  limits ({lim['source']}, same block size): memcpy {lim['memcpy']:.3f} GB/s, "
              f"tcp stream {lim['tcp']:.3f} GB/s   ratio: {res['gbps'] / lim['memcpy']:.2f}x "
              f"memcpy, {res['gbps'] / lim['tcp']:.2f}x tcp")
    if args.json:
        print(json.dumps(res))
    return 0 if res["errors"] == 0 else 2


if __name__ == "__main__":
    raise SystemExit(main())
