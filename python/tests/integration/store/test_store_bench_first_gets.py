"""mc_store_bench's get_first rows measure what they claim: every get asks the master.

The bench's clients keep 256 replica locations and read a pool of more keys in order, so each
key's location has left the cache when the key comes round again and no read waits
(docs/benchmarks.md, "Gets, twice"). A real master, a real holder and two bench processes run
over loopback; the master's own counters say how many keys it was asked for, by the readers
themselves or by the holder they asked (a first get of a small value goes to the holder, which
asks the master for it: docs/store.md, "Gets answered by a holder")."""

import json
import os
import subprocess
import sys
from pathlib import Path

from mooncake.cli import binary_path
from store_helpers import Master

# the harness's process helpers (benchmarks/compare, at the repository's root)
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from benchmarks.compare.procs import Worker  # noqa: E402

PROCS = 2


def test_every_first_get_asks_the_master(tmp_path):
    bench = binary_path("mc_store_bench")
    master = Master()
    holder = None
    try:
        # the bench's holder role serves its segment until its standard input closes
        holder = Worker([bench, "--role=holder", f"--master={master.addr}",
                         f"--segment_size={64 << 20}"], tmp_path / "holder.log", os.environ.copy())
        ready = holder.next(timeout=120)
        assert ready and ready.get("ready"), f"holder not ready: {ready} {holder.tail()}"
        counters = ("master_get_replica_list_requests_total",
                    "master_batch_get_replica_list_items_total")
        before = {k: master.metric(k) for k in counters}
        # 8 MiB over 2 processes: 1024 keys of 4 KiB each, four times what the cache keeps
        proc = subprocess.run([bench, f"--master={master.addr}", f"--procs={PROCS}",
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
        asked = {k: master.metric(k) - before[k] for k in counters}
        # each timed get, and each process's check read of each workload's pool, asked for its
        # key once; the holder's lookups for several readers travel as one batch
        assert sum(asked.values()) == res[1]["ops"] + 2 * PROCS + res[8]["ops"], asked
    finally:
        if holder:
            holder.stop(grace=30)
        master.stop()
