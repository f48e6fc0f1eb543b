"""Reads from the disk tier against the device's own limit, measured in the same run.

    python benchmarks/disk_tier_bench.py --dir /tmp [--sizes 4kb,64kb,1mb] [--total 512mb]

Starts its own mooncake_master (--enable_offload) and one storage node (mooncake_client
--root_fs_dir=DIR/tier, a 16 MiB memory segment), then, for each object size: puts --total bytes
of objects (so nearly all of them leave memory and live only on the node's disk), waits until
every one was offloaded, evicts the tier's bucket files from the page cache
(posix_fadvise DONTNEED: the reads hit the device, as objects evicted long ago do), and gets every
disk-only object once, in the order they were written (--order=random: shuffled), from this
process (a pure client: the bytes come from the node over TCP). It prints throughput and per-get latency percentiles.

The limit: `dd iflag=direct` reading files of the same total size on the same file system with
the object size as the block size (written first with oflag=direct, then dropped from the cache
the same way), as many dd processes at once as there are reader threads (--threads), right after
each read pass (--rounds of them per size, the objects dropped from the page cache before each).
Each round's ratio is the tier's throughput over the dd pass right after it; the summary line
gives the median over rounds.
"""

import argparse
import ctypes
import os
import random
import re
import shutil
import signal
import statistics
import socket
import subprocess
import sys
import tempfile
import threading
import time

from mooncake.cli import binary_path
from mooncake.store import MooncakeDistributedStore

UNITS = {"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}


def size_of(text):
    m = re.fullmatch(r"(\d+)\s*(kb|mb|gb)?", text.strip().lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4kb, 1mb)")
    return int(m.group(1)) * UNITS.get(m.group(2) or "", 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_cache(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def dd_direct_read(path, block, total, streams):
    """MB/s of `streams` dd processes at once, each reading its own file (written the same way,
    total bytes in all) with O_DIRECT in block-sized reads: the device at the readers'
    concurrency."""
    count = max(1, total // block // streams)
    files = [f"{path}.{i}" for i in range(streams)]
    for f in files:
        subprocess.run(["dd", "if=/dev/urandom", f"of={f}", f"bs={block}", f"count={count}",
                        "oflag=direct", "status=none"], check=True)
    drop_cache(files)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["dd", f"if={f}", "of=/dev/null", f"bs={block}", f"count={count}",
                               "iflag=direct", "status=none"]) for f in files]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("dd failed")
    dt = time.perf_counter() - t0
    for f in files:
        os.unlink(f)
    return streams * count * block / dt / 1e6


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


class Proc:
    def __init__(self, cmd, ready):
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        self.lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if ready(line):
                break
        else:
            self.stop()
            raise RuntimeError("did not start:\n" + "".join(self.lines))
        threading.Thread(target=self.p.stdout.read, daemon=True).start()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def fs_type(path):
    out = subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True)
    return out.stdout.split()[-1] if out.returncode == 0 else "?"


def fill(store, size, total):
    """Puts the objects of one size; (keys, value, put seconds, retried puts)."""
    n = max(64, total // size)
    prefix = f"b{size}-"
    value = os.urandom(size)
    t0 = time.perf_counter()
    retries = 0
    for i in range(n):
        rc = store.put(prefix + str(i), value)
        # A put refused for want of room (-200) is tried again (counted and printed): the pool
        # is full of objects whose offload has not finished, or a segment was briefly reported
        # unreachable.
        while rc == -200 and retries < 100:
            retries += 1
            time.sleep(0.05)
            rc = store.put(prefix + str(i), value)
        if rc != 0:
            raise RuntimeError(f"put {i} failed: {rc}")
    return [prefix + str(i) for i in range(n)], value, time.perf_counter() - t0, retries


def wait_disk_only(store, keys, size):
    """The keys whose only copy is on disk, once (nearly) every one left memory."""
    deadline = time.monotonic() + 120
    while True:
        descs = store.batch_get_replica_desc(keys)
        disk_only = [k for k in keys if [d.type.name for d in descs[k]] == ["LOCAL_DISK"]]
        if len(disk_only) >= len(keys) - (16 << 20) // size - 1 or time.monotonic() > deadline:
            return disk_only
        time.sleep(0.2)


def read_pass(store, tier, keys, size, threads):
    """Gets every key once (the tier's files dropped from the page cache first); (MB/s, sorted
    latencies, reads the node served from disk)."""
    drop_cache([os.path.join(tier, f) for f in os.listdir(tier) if f.endswith(".mcb")])
    lat = []
    lock = threading.Lock()
    errors = []
    parts = [keys[i::threads] for i in range(threads)]

    def reader(ks):
        b = ctypes.create_string_buffer(size)
        a = ctypes.addressof(b)
        store.register_buffer(a, size)
        mine = []
        for k in ks:
            s = time.perf_counter()
            got = store.get_into(k, a, size)
            mine.append(time.perf_counter() - s)
            if got != size:
                errors.append((k, got))
                break
        store.unregister_buffer(a)
        with lock:
            lat.extend(mine)

    reads0 = store.get_offload_rpc_read_count()
    t0 = time.perf_counter()
    ts = [threading.Thread(target=reader, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"gets failed: {errors[:3]}")
    return len(keys) * size / dt / 1e6, sorted(lat), store.get_offload_rpc_read_count() - reads0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp", help="file system to put the tier on")
    ap.add_argument("--sizes", default="4kb,64kb,1mb")
    ap.add_argument("--total", type=size_of, default=512 << 20,
                    help="bytes put per size (4 KiB objects: a quarter of it, at most 64 MiB)")
    ap.add_argument("--threads", type=int, default=1, help="reader threads")
    ap.add_argument("--rounds", type=int, default=3,
                    help="read passes per size, each followed by its dd pass")
    ap.add_argument("--order", choices=("written", "random"), default="written",
                    help="read the objects in the order they were written (sequential on disk) "
                         "or shuffled")
    a = ap.parse_args(argv)
    sizes = [size_of(s) for s in a.sizes.split(",")]
    work = tempfile.mkdtemp(prefix="mc-disk-bench-", dir=a.dir)
    tier = os.path.join(work, "tier")
    port = free_port()
    master = node = None
    store = MooncakeDistributedStore()
    try:
        master = Proc([binary_path("mooncake_master"), f"--port={port}", "--metrics_port=0",
                       "--rpc_address=127.0.0.1", "--enable_offload",
                       "--default_kv_lease_ttl=100"],
                      lambda line: "listening on rpc" in line)
        node = Proc([binary_path("mooncake_client"), f"--master_server_address=127.0.0.1:{port}",
                     "--host=127.0.0.1", "--metadata_server=P2PHANDSHAKE",
                     "--global_segment_size=16mb", f"--port={free_port()}",
                     f"--root_fs_dir={tier}", f"--disk_capacity={4 * a.total}"],
                    lambda line: "serving dummy clients" in line)
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "",
                         f"127.0.0.1:{port}")
        if rc != 0:
            raise RuntimeError(f"setup: {rc}")
        load = os.getloadavg()
        print(f"# disk_tier_bench: {fs_type(work)} at {work}, {a.threads} reader thread(s), "
              f"{a.order} order, "
              f"loadavg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        for size in sizes:
            total = a.total if size >= 64 << 10 else min(a.total // 4, 64 << 20)
            keys, value, put_s, retries = fill(store, size, total)
            disk_only = wait_disk_only(store, keys, size)
            if a.order == "random":
                random.Random(size).shuffle(disk_only)
            ratios, lat, from_disk = [], [], 0
            for rnd in range(a.rounds):
                mbps, lats, served = read_pass(store, tier, disk_only, size, a.threads)
                dd = dd_direct_read(os.path.join(work, "dd.bin"), size, total, a.threads)
                ratios.append(mbps / dd)
                lat += lats
                from_disk += served
                print(f"  size {size:>8} B round {rnd + 1}: get {mbps:8.1f} MB/s"
                      f" | dd iflag=direct bs={size} x{a.threads}: {dd:8.1f} MB/s"
                      f" | ratio {mbps / dd:.2f}x")
            # Correctness: a sample read back whole matches what was put.
            for k in random.sample(disk_only, min(8, len(disk_only))):
                if store.get(k) != value:
                    raise RuntimeError(f"{k}: wrong bytes")
            lat.sort()
            print(f"size {size:>8} B: {len(disk_only)}/{len(keys)} objects on disk only, "
                  f"{from_disk} reads served from disk in {a.rounds} round(s) (cold), "
                  f"p50 {pct(lat, 0.50) * 1e6:.1f} us, p99 {pct(lat, 0.99) * 1e6:.1f} us"
                  f" | ratio to dd, median of rounds: {statistics.median(ratios):.2f}x"
                  f" | (puts incl. offload {len(keys) * size / put_s / 1e6:.1f} MB/s,"
                  f" {retries} retried)")
            sys.stdout.flush()
            for k in keys:
                store.remove(k)
    finally:
        store.close()
        if node:
            node.stop()
        if master:
            master.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
