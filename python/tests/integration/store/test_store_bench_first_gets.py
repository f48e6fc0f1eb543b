"""mc_store_bench's get_first rows measure what they claim: every get asks the master.

The bench's clients keep 256 replica locations and read a pool of more keys in order, so each
key's location has left the cache when the key comes round again and no read waits
(docs/benchmarks.md, "Gets, twice"). A real master, a real holder and two bench processes run
over loopback; the master's own counters say how many keys it was asked for."""

import json
import re
import select
import subprocess
import time
import urllib.request

from mooncake.cli import binary_path
from store_helpers import Master

PROCS = 2


def _metrics(master):
    with urllib.request.urlopen(f"http://127.0.0.1:{master.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+) (\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _start_holder(bench, master, log):
    """The bench's holder role: it serves its segment until its standard input closes. Its
    stderr goes to a file (a pipe nobody reads could fill and stall it)."""
    with open(log, "wb") as err:
        holder = subprocess.Popen([bench, "--role=holder", f"--master=127.0.0.1:{master.port}",
                                   f"--segment_size={64 << 20}"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([holder.stdout], [], [], deadline - time.monotonic())
        if ready:
            line = holder.stdout.readline()
            assert line, f"holder exited: {log.read_text(errors='replace')}"
            if json.loads(line).get("ready"):
                return holder
    holder.kill()
    raise AssertionError("holder not ready within 120 s")


def test_every_first_get_asks_the_master(tmp_path):
    bench = binary_path("mc_store_bench")
    master = Master()
    holder = None
    try:
        holder = _start_holder(bench, master, tmp_path / "holder.log")
        before = _metrics(master)
        # 8 MiB over 2 processes: 1024 keys of 4 KiB each, four times what the cache keeps
        proc = subprocess.run([bench, f"--master=127.0.0.1:{master.port}", f"--procs={PROCS}",
                               "--duration=0.5", f"--pool_bytes={8 << 20}", "--json",
                               "--workloads=get_first:4k:1,get_first:4k:8"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        rows = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith('{"workload"')]
        res = {r["workload"]["batch"]: r["result"] for r in rows}
        assert set(res) == {1, 8}, proc.stdout
        for batch, r in res.items():
            assert "error" not in r, (r, proc.stderr)
            assert r["waits"] == 0, (batch, r)  # no read waited for a gap: the cache forgot it
            assert r["ops"] >= 3 * batch * PROCS, r
        after = _metrics(master)
        asked = {k: after.get(k, 0) - before.get(k, 0) for k in
                 ("master_get_replica_list_requests_total",
                  "master_batch_get_replica_list_items_total")}
        # single gets: each timed one, and each process's check read of each workload's pool
        assert asked["master_get_replica_list_requests_total"] == res[1]["ops"] + 2 * PROCS, asked
        assert asked["master_batch_get_replica_list_items_total"] == res[8]["ops"], asked
    finally:
        if holder:
            holder.stdin.close()
            try:
                holder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                holder.kill()
                holder.wait()
        master.stop()
