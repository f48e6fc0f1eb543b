"""The fair baselines (issue 26): C against C, in alternating repeats.

Each repeat runs, in this order, our side then the baselines' (A B A B ...):

* ours: ``mc_store_bench`` (store.h, C) with 1, 2, 4, 8 client processes against our master and
  a holder of its own kind (``mc_store_bench --role=holder``): put, get of keys re-read within the
  replica-location cache window ("cached") and of keys read once ("first read", every get asks
  the master), single and batched (x32 at 4 KiB, x16 at 64 KiB); at one process also 1 and
  16 MiB values, from heap memory and from a registered buffer; and the Transfer Engine over tcp
  with ``mooncake_transfer_bench`` (C), read and write of 16 and 64 MiB blocks, one thread;
* Redis through its own C client: ``redis-benchmark`` SET/GET at the same value size, pipelining
  (``-P 1``, ``-P 32``/``-P 16`` for the batches) and client count (``-c 1..8``: one process
  multiplexing its connections, where ours are processes), against a redis-server without
  persistence;
* the reference through its Python API (``worker_store.py`` in its venv), the same sweep;
* the limits: one ``iperf3`` stream over loopback (``-c -t N -J``, its default block) and
  single-thread memcpy (``mc_limits``);
* the disk tier's 64 KiB gets against ``dd iflag=direct`` on the same file system
  (``disk_tier_bench.py``, one reader, one round).

Every record carries its repeat; the report prints each ratio as the median of the repeats with
their min-max spread.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from benchmarks.compare import envs, limits, procs

HERE = Path(__file__).resolve().parent
KiB, MiB = 1 << 10, 1 << 20
SMALL = (4 * KiB, 64 * KiB)
BATCH = {4 * KiB: 32, 64 * KiB: 16}


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


class Fair:
    def __init__(self, run):
        self.run = run
        self.a = run.args
        self.log = run.log
        self.records = []
        self.missing = []  # baselines that could not run, with the reason
        q = self.a.quick
        self.procs = [1, 2] if q else [1, 2, 4, 8]
        self.sizes = [4 * KiB] if q else list(SMALL)
        self.large = [1 * MiB] if q else [1 * MiB, 16 * MiB]
        self.te_blocks = ([16 * MiB] if q else [16 * MiB, 64 * MiB]) if "te" in self.a.benches else []
        self.dur = self.a.duration
        self.redis_rate = {}  # (op, size, batch): the last measured op/s

    # ---- helpers ------------------------------------------------------------------------------

    def add(self, rep, **rec):
        rec["repeat"] = rep
        self.records.append(rec)
        what = " ".join(f"{k}={v}" for k, v in rec.items() if k in (
            "system", "op", "size", "batch", "procs", "zc"))
        if "error" in rec:
            self.log(f"  fair r{rep} {what}: ERROR {rec['error']}")
        else:
            self.log(f"  fair r{rep} {what}: {rec.get('ops_per_s', 0):10.0f} op/s "
                     f"{rec['gbps']:7.3f} GB/s" + (f"  p50 {rec['p50_us']:.1f} us p99 {rec['p99_us']:.1f} us"
                                                  if rec.get("p50_us") else ""))

    def miss(self, what, why):
        if not any(m["what"] == what for m in self.missing):
            self.missing.append({"what": what, "reason": why})
            self.log(f"  fair: {what} not run: {why}")

    def tool(self, name):
        """Our C tool: bundled with the package (probe) or in a build tree."""
        ours = self.run.systems.get("ours", {})
        if ours.get(name):
            return ours[name]
        for d in [Path(p) / "bin" for p in ours.get("package_dir", [])] + [
                self.run.repo / "build" / b / "benchmarks" for b in ("ctest", "compare", "rel", "editable")]:
            p = d / name
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
        return shutil.which(name)

    def store_workloads(self, nprocs):
        out = []
        for size in self.sizes:
            for batch in (1, BATCH[size]):
                for op in ("put", "get_cached", "get_first"):
                    out.append((op, size, batch, False))
        if nprocs == 1:
            for size in self.large:
                for zc in (False, True):
                    for op in ("put", "get_cached", "get_first"):
                        out.append((op, size, 1, zc))
        return out

    # ---- ours: mc_store_bench ---------------------------------------------------------------

    def ours_store(self, rep):
        ours = self.run.systems.get("ours", {})
        bench = self.tool("mc_store_bench")
        if ours.get("status") != "ok" or not ours.get("master"):
            return self.miss("ours (mc_store_bench)", ours.get("reason") or "our master not found")
        if not bench:
            return self.miss("ours (mc_store_bench)", "mc_store_bench not built or bundled")
        env = envs.clean_env()
        port, mport = procs.free_port(), procs.free_port()
        tag = f"fair-r{rep}"
        master = procs.Server([ours["master"], f"--port={port}", "--rpc_address=127.0.0.1",
                               f"--metrics_port={mport}"], port, self.run.logs / f"{tag}-master.log", env)
        holder = None
        try:
            if master.error:
                return self.miss("ours (mc_store_bench)", f"mooncake_master {master.error}")
            seg = (128 if self.a.quick else 1024) * MiB  # quick: small pools, quick to prepare
            holder = procs.Worker([bench, "--role=holder", f"--master=127.0.0.1:{port}",
                                   f"--segment_size={seg}"], self.run.logs / f"{tag}-holder.log",
                                  envs.clean_env(envs.OURS_HOLDER_ENV))
            try:
                ready = holder.next(timeout=60)
            except TimeoutError:
                ready = None
            if not ready or not ready.get("ready"):
                return self.miss("ours (mc_store_bench)", (ready or {}).get("fatal") or
                                 f"holder did not start: {holder.tail()}")
            for n in self.procs:
                wl = self.store_workloads(n)
                spec = ",".join(f"{op}:{size}:{batch}:{'zc' if zc else 'heap'}" for op, size, batch, zc in wl)
                cmd = [bench, f"--master=127.0.0.1:{port}", f"--procs={n}", f"--duration={self.dur}",
                       f"--pool_bytes={seg * 3 // 8}", "--json", f"--workloads={spec}"]
                self.log(f"fair r{rep}: mc_store_bench, {n} process(es), {len(wl)} workloads")
                self._json_tool(cmd, rep, "ours-c", "store", f"{tag}-store-p{n}.log",
                                timeout=120 + len(wl) * (self.dur * 4 + 10), expect=len(wl),
                                extra={"procs": n})
        finally:
            if holder:
                holder.stop()
            master.stop()

    def _json_tool(self, cmd, rep, system, kind, log, timeout, expect, extra):
        with open(self.run.logs / log, "ab") as err:
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, timeout=timeout,
                                   env=envs.clean_env())
                out = r.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired as exc:
                out = (exc.stdout or b"").decode(errors="replace")
                self.add(rep, system=system, kind=kind, **extra, error=f"timed out after {timeout:.0f} s")
        got = 0
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "fatal" in msg:
                self.add(rep, system=system, kind=kind, **extra, error=msg["fatal"])
            if "workload" in msg:
                got += 1
                self.add(rep, system=system, kind=kind, **{**msg["workload"], **extra}, **msg["result"])
        if got < expect:
            self.add(rep, system=system, kind=kind, **extra,
                     error=f"{got}/{expect} workloads reported; see logs/{log}")

    # ---- ours: Transfer Engine tcp (mooncake_transfer_bench) --------------------------------

    def ours_te(self, rep):
        bench = self.tool("mooncake_transfer_bench")
        if not bench:
            return self.miss("ours TE (mooncake_transfer_bench)", "not built or bundled")
        for op in ("write", "read"):
            for block in self.te_blocks:
                cmd = [bench, "--protocol=tcp", f"--operation={op}", f"--block_size={block}",
                       "--batch_size=1", "--threads=1",
                       f"--buffer_size={4 * block if self.a.quick else max(4 * block, 256 * MiB)}",
                       f"--duration={max(self.dur, 0.3)}", "--report_limits=false", "--json"]
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                       env=envs.clean_env())
                    d = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
                except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
                    d, r = None, exc
                base = {"system": "ours-c", "kind": "te", "op": op, "size": block, "batch": 1, "procs": 1}
                if not d:
                    self.add(rep, **base, error=f"mooncake_transfer_bench failed: "
                             f"{envs._last_line(getattr(r, 'stderr', '') or str(r))}")
                    continue
                self.add(rep, **base, gbps=d["gbps"], ops_per_s=d["gbps"] * 1e9 / block,
                         p50_us=d["lat_p50_us"], p99_us=d["lat_p99_us"])

    # ---- Redis through redis-benchmark -------------------------------------------------------

    def redis(self, rep):
        exe = shutil.which("redis-benchmark")
        info = envs.ensure_redis(self.a, self.log)  # the server only: no redis-py needed here
        if not exe:
            return self.miss("redis-benchmark", "not installed (Debian redis-tools; tools/dev/install-deps.sh)")
        if info.get("status") != "ok":
            return self.miss("redis-benchmark", info.get("reason", "redis-server unavailable"))
        port = procs.free_port()
        srv = procs.Server([info["server"], "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--daemonize", "no", "--dir", str(self.run.logs)],
                           port, self.run.logs / f"fair-r{rep}-redis.log", envs.clean_env())
        try:
            if srv.error:
                return self.miss("redis-benchmark", f"redis-server {srv.error}")
            for n in self.procs:
                for size in self.sizes:
                    keys = max(64, min(2000 if self.a.quick else 10000, (64 * MiB) // size))
                    # the GETs read keys that exist: fill the key space first (untimed; 4 SETs
                    # per key at random leave about 2% of them unset)
                    self._redis_run(exe, port, "set", size, 32, 1, keys * 4, keys)
                    for batch in (1, BATCH[size]):
                        for op in ("set", "get"):
                            # redis-benchmark runs a number of requests, not a time: size it from
                            # the rate of the last run of the same shape (a first guess before)
                            rate = self.redis_rate.get((op, size, batch),
                                                       (20000 if batch == 1 else 100000) * 4 * KiB / max(size, 4 * KiB) ** 0.5 / 64)
                            n_req = int(max(1000, rate * self.dur))
                            n_req -= n_req % (batch * n)
                            res = self._redis_run(exe, port, op, size, batch, n, max(n_req, batch * n), keys)
                            if "ops_per_s" in res:
                                self.redis_rate[(op, size, batch)] = res["ops_per_s"]
                            base = {"system": "redis-c", "kind": "store", "op": "put" if op == "set" else "get",
                                    "size": size, "batch": batch, "procs": n, "zc": False}
                            if "error" in res:
                                self.add(rep, **base, error=res["error"])
                            else:
                                self.add(rep, **base, **res)
                            if batch == 1 and n > 1:
                                # the same shape as ours: n client processes, one connection each
                                res = self._redis_procs(exe, port, op, size, n, max(n_req, n), keys)
                                base["system"] = "redis-c-procs"
                                if "error" in res:
                                    self.add(rep, **base, error=res["error"])
                                else:
                                    self.add(rep, **base, **res)
        finally:
            srv.stop()

    @staticmethod
    def _redis_procs(exe, port, op, size, n, requests, keys):
        """n redis-benchmark processes at once, each one connection (-c 1) with its share of the
        requests: the aggregate is the sum of their rates, the latencies the median of theirs."""
        cmd = [exe, "-h", "127.0.0.1", "-p", str(port), "--csv", "-t", op, "-d", str(size),
               "-P", "1", "-c", "1", "-n", str(max(1, requests // n)), "-r", str(keys)]
        running = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for _ in range(n)]
        rows, err = [], None
        for p in running:
            try:
                out, stderr = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                out, stderr = p.communicate()
                err = "redis-benchmark timed out"
                continue
            parsed = parse_redis_csv(out)
            if p.returncode != 0 or not parsed:
                err = f"redis-benchmark failed ({p.returncode}): {envs._last_line(stderr or out)}"
            else:
                rows.append(parsed[0])
        if err:
            return {"error": err}
        ops = sum(r["rps"] for r in rows)
        med = lambda k: sorted(r.get(k) or 0 for r in rows)[len(rows) // 2]
        return {"ops_per_s": ops, "gbps": ops * size / 1e9, "p50_us": med("p50_us"),
                "p99_us": med("p99_us"), "ops": requests,
                "command": f"{n} x (" + " ".join(cmd[1:]) + ")"}

    @staticmethod
    def _redis_run(exe, port, op, size, pipeline, clients, requests, keys):
        cmd = [exe, "-h", "127.0.0.1", "-p", str(port), "--csv", "-t", op, "-d", str(size),
               "-P", str(pipeline), "-c", str(clients), "-n", str(requests), "-r", str(keys)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return {"error": "redis-benchmark timed out"}
        parsed = parse_redis_csv(r.stdout)
        if r.returncode != 0 or not parsed:
            return {"error": f"redis-benchmark failed ({r.returncode}): {envs._last_line(r.stderr or r.stdout)}"}
        row = parsed[0]
        ops = row["rps"]
        return {"ops_per_s": ops, "gbps": ops * size / 1e9, "p50_us": row.get("p50_us"),
                "p99_us": row.get("p99_us"), "ops": requests, "command": " ".join(cmd[1:])}

    # ---- the reference through its Python API ----------------------------------------------

    def reference(self, rep):
        ref = self.run.systems.get("reference")
        if not ref:
            return  # not asked for
        if ref.get("status") != "ok" or not ref.get("store"):
            return self.miss("reference (Python API)", ref.get("reason") or ref.get("store_reason", "?"))
        env = envs.clean_env()
        port, mport = procs.free_port(), procs.free_port()
        tag = f"fair-r{rep}-ref"
        master = procs.Server([ref["master"], f"--port={port}", "--rpc_address=127.0.0.1",
                               f"--metrics_port={mport}"], port, self.run.logs / f"{tag}-master.log", env)
        worker = str(HERE / "worker_store.py")
        seg = self.a.segment_mib * MiB
        holder = None
        try:
            if master.error:
                return self.miss("reference (Python API)", f"its mooncake_master {master.error}")
            extra = ["--master", f"127.0.0.1:{port}", "--protocol", "tcp"]
            holder = procs.Worker([ref["python_path"], worker, "holder", *extra, "--segment", str(seg)],
                                  self.run.logs / f"{tag}-holder.log", env)
            try:
                ready = holder.next(timeout=60)
            except TimeoutError:
                ready = None
            if not ready or not ready.get("ready"):
                return self.miss("reference (Python API)", (ready or {}).get("fatal") or holder.tail())
            for n in self.procs:
                wl = [{"op": op, "size": size, "batch": batch, "zc": False, "duration": self.dur}
                      for size in self.sizes for batch in (1, BATCH[size]) for op in ("put", "get")]
                self.log(f"fair r{rep}: reference (Python API), {n} process(es), {len(wl)} workloads")
                self._sync_drivers(rep, ref["python_path"], worker, extra, n, wl, seg, tag)
        finally:
            if holder:
                holder.stop()
            master.stop()

    def _sync_drivers(self, rep, python, worker, extra, n, wl, seg, tag):
        env = envs.clean_env()
        drivers = [procs.Worker([python, worker, "driver", *extra, "--sync", "--pool-bytes",
                                 str(seg * 3 // 8 // n), "--workloads", json.dumps(wl)],
                                self.run.logs / f"{tag}-driver-p{n}-{i}.log", env) for i in range(n)]
        base = {"system": "reference-py", "kind": "store", "procs": n, "zc": False}
        try:
            for d in drivers:
                msg = d.next(timeout=120)
                if not msg or not msg.get("ready"):
                    raise RuntimeError((msg or {}).get("fatal") or d.tail())
            for w in wl:
                for d in drivers:
                    msg = d.next(timeout=300)
                    if not msg or "prepared" not in msg:
                        raise RuntimeError(f"driver not prepared: {msg or d.tail()}")
                for d in drivers:
                    d.send("go")
                res = [d.next(timeout=120 + 10 * self.dur) for d in drivers]
                one = {"op": w["op"], "size": w["size"], "batch": w["batch"]}
                errs = [r["result"]["error"] for r in res if r and "error" in r.get("result", {})]
                if errs or any(r is None for r in res):
                    self.add(rep, **base, **one, error=(errs or ["a driver exited"])[0])
                    continue
                rs = [r["result"] for r in res]
                ops = sum(r["ops_per_s"] for r in rs)
                lat = sorted(r["p50_us"] for r in rs)
                self.add(rep, **base, **one, ops_per_s=ops, gbps=ops * w["size"] / 1e9,
                         p50_us=lat[len(lat) // 2], p99_us=max(r["p99_us"] for r in rs))
        except (RuntimeError, TimeoutError) as exc:
            self.add(rep, **base, error=f"reference drivers: {exc}")
        finally:
            for d in drivers:
                d.stop()

    # ---- limits and the disk ----------------------------------------------------------------

    def iperf3(self, rep):
        if not shutil.which("iperf3"):
            return self.miss("iperf3", "not installed (tools/dev/install-deps.sh)")
        try:
            gbps, ver, cmd = limits.iperf3_stream(max(1, round(self.a.limit_duration)))
            self.add(rep, system="iperf3", kind="limit", gbps=gbps, source=ver, command=cmd)
        except Exception as exc:  # noqa: BLE001 - reported as the baseline's failure
            self.add(rep, system="iperf3", kind="limit", error=str(exc))

    def memcpy(self, rep):
        bundled = self.run.systems.get("ours", {}).get("mc_limits")
        path = limits.find_mc_limits(bundled, self.run.repo)
        got = None
        if path:
            try:
                got, _ = limits.run_mc_limits(path, self.a.limit_duration)
            except RuntimeError:
                got = None
        if got and got.get("memcpy"):
            self.add(rep, system="memcpy", kind="limit", gbps=got["memcpy"], source="mc_limits")
        else:
            self.add(rep, system="memcpy", kind="limit", gbps=limits.own_memcpy(self.a.limit_duration),
                     source="ctypes.memmove")

    def disk(self, rep):
        ours = self.run.systems.get("ours", {})
        if ours.get("status") != "ok" or not ours.get("store"):
            return self.miss("disk tier vs dd", "our store unavailable")
        d = self.a.disk_dir or str(self.run.build)
        total = "16mb" if self.a.quick else "256mb"
        cmd = [ours["python_path"], str(HERE.parent / "disk_tier_bench.py"), "--dir", d, "--sizes", "64kb",
               "--threads", "1", "--rounds", "1", "--total", total]
        self.log(f"fair r{rep}: disk tier 64 KiB gets vs dd iflag=direct in {d}")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=envs.clean_env())
        except subprocess.TimeoutExpired:
            self.add(rep, system="ours-disk", kind="disk", size=64 * KiB, error="disk_tier_bench timed out")
            return
        (self.run.logs / f"fair-r{rep}-disk.log").write_text(r.stdout + r.stderr)
        got = parse_disk_round(r.stdout)
        if r.returncode != 0 or not got:
            self.add(rep, system="ours-disk", kind="disk", size=64 * KiB,
                     error=f"disk_tier_bench failed ({r.returncode}): {envs._last_line(r.stderr or r.stdout)}")
            return
        fs = re.search(r"disk_tier_bench: (\S+) at", r.stdout)
        self.add(rep, system="ours-disk", kind="disk", size=64 * KiB, gbps=got["get"] / 1e3,
                 ops_per_s=got["get"] * 1e6 / (64 * KiB), fs=fs.group(1) if fs else "?")
        self.add(rep, system="dd-direct", kind="disk", size=64 * KiB, gbps=got["dd"] / 1e3,
                 ops_per_s=got["dd"] * 1e6 / (64 * KiB), fs=fs.group(1) if fs else "?")

    # ---- the whole phase ------------------------------------------------------------------------

    def measure(self):
        self.load_start = loadavg()
        self.log(f"fair baselines: {self.a.repeats} alternating repeat(s), load average {self.load_start}")
        t0 = time.monotonic()
        for rep in range(1, self.a.repeats + 1):
            self.log(f"fair repeat {rep}/{self.a.repeats}: ours, then the baselines")
            if "store" in self.a.benches:
                self.ours_store(rep)
            if "te" in self.a.benches:
                self.ours_te(rep)
            if "store" in self.a.benches:
                self.redis(rep) if "redis" in self.a.systems else None
                self.reference(rep)
            self.iperf3(rep)
            self.memcpy(rep)
            if "store" in self.a.benches and not self.a.no_disk:
                self.disk(rep)
        self.load_end = loadavg()
        self.log(f"fair baselines done in {time.monotonic() - t0:.0f} s, load average {self.load_end}")
        rb = shutil.which("redis-benchmark")
        version = None
        if rb:
            r = subprocess.run([rb, "--version"], capture_output=True, text=True)
            version = r.stdout.strip()
        return {"repeats": self.a.repeats, "redis_benchmark": version, "loadavg_start": self.load_start, "loadavg_end": self.load_end,
                "procs": self.procs, "sizes": self.sizes, "large": self.large, "te_blocks": self.te_blocks,
                "batch": {str(k): v for k, v in BATCH.items()}, "missing": self.missing,
                "records": self.records}


def parse_redis_csv(text):
    """redis-benchmark --csv: a header row, then one row per test; latencies in ms."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows or rows[0][:2] != ["test", "rps"]:
        return []
    hdr = rows[0]
    out = []
    for r in rows[1:]:
        d = dict(zip(hdr, r))
        try:
            rec = {"test": d["test"], "rps": float(d["rps"])}
        except (KeyError, ValueError):
            continue
        for k in ("avg", "min", "p50", "p95", "p99", "max"):
            try:
                rec[f"{k}_us"] = float(d[f"{k}_latency_ms"]) * 1e3
            except (KeyError, ValueError):
                pass
        out.append(rec)
    return out


def parse_disk_round(text):
    """The first round line of disk_tier_bench: our get MB/s and dd's."""
    m = re.search(r"round \d+: get\s+([0-9.]+) MB/s \| dd iflag=direct \S+ x\d+:\s+([0-9.]+) MB/s", text)
    return {"get": float(m.group(1)), "dd": float(m.group(2))} if m else None
