"""Side-by-side benchmark: our Transfer Engine and Store against the reference Mooncake, Redis and
the machine's own limits, in one invocation.

    python -m benchmarks.compare                 # everything, default settings (< 10 min)
    python -m benchmarks.compare --quick         # CI smoke (< 2 min)
    python benchmarks/compare/run.py --systems ours,redis --out /tmp/res

Writes results.json, results.md (one table per workload) and PNG plots into the output directory
(default bench-results/<timestamp>), printing progress while it runs.
"""

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make "benchmarks.compare" importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.compare import envs, fair, limits, procs, report  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KiB, MiB = 1 << 10, 1 << 20
SYSTEMS = ("ours", "reference", "redis")


def human(n):
    for unit, div in (("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


class Run:
    def __init__(self, args):
        self.args = args
        self.repo = REPO
        self.fair = None
        self.commit = repo_commit()  # at the start: the tree may change while a long run goes on
        self.t0 = time.monotonic()
        self.out = Path(args.out)
        self.logs = self.out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.build = Path(args.build_dir)
        self.build.mkdir(parents=True, exist_ok=True)
        self.results = []
        self.systems = {}
        self.notes = []

    def log(self, msg):
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)

    # ---- settings ----------------------------------------------------------------------------

    def te_blocks(self):
        if self.args.quick:
            return [4 * KiB, 1 * MiB, 16 * MiB]
        return [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB]

    def store_sizes(self):
        if self.args.quick:
            return [4 * KiB, 1 * MiB]
        return [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB]

    @staticmethod
    def batch_for(size):
        # Batches of about 1-8 MiB, at least 4 values: what a KV-cache connector moves per call.
        return {4 * KiB: 32, 64 * KiB: 16, 1 * MiB: 8}.get(size, 4)

    def te_workloads(self):
        d = self.args.duration
        return [{"op": op, "block": b, "threads": t, "duration": d}
                for op in ("write", "read") for t in (1, 2) for b in self.te_blocks()]

    def store_workloads(self, zc_ok=True):
        d = self.args.duration
        out = []
        for zc in ((False, True) if zc_ok else (False,)):
            for batched in (False, True):
                for op in ("put", "get"):
                    for s in self.store_sizes():
                        out.append({"op": op, "size": s, "batch": self.batch_for(s) if batched else 1,
                                    "zc": zc, "duration": d})
        return out

    # ---- one worker session --------------------------------------------------------------------

    def _collect(self, w, base, label, fmt, n_expected):
        deadline = max(120.0, 20 * self.args.duration + 60)
        got = 0
        while True:
            try:
                msg = w.next(timeout=deadline)
            except TimeoutError as exc:
                self.log(f"  {label}: worker stalled ({exc}); stopping it")
                self.results.append({**base, "error": f"worker stalled: {exc}"})
                return
            if msg is None:
                if got < n_expected:
                    why = f"worker exited after {got}/{n_expected} workloads: {w.tail()}"
                    self.log(f"  {label}: {why}")
                    self.results.append({**base, "error": why})
                return
            if "fatal" in msg:
                self.log(f"  {label}: FAILED: {msg['fatal']}")
                self.results.append({**base, "error": msg["fatal"]})
                return
            if "workload" in msg:
                got += 1
                rec = {**base, **msg["workload"], **msg["result"]}
                self.results.append(rec)
                self.log(f"  {label} {fmt(rec)}")

    @staticmethod
    def _fmt_res(rec):
        if "error" in rec:
            return f"ERROR {rec['error']}"
        return (f"{rec['gbps']:7.3f} GB/s {rec['ops_per_s']:10.0f} ops/s  "
                f"p50 {rec['p50_us']:9.1f} us  p99 {rec['p99_us']:9.1f} us")

    # ---- transfer engine ---------------------------------------------------------------------

    def run_te(self, system, python, protocol):
        wl = self.te_workloads()
        label = f"te {system}/{protocol}"
        base = {"bench": "te", "system": system, "protocol": protocol}
        span = max([w["block"] for w in wl] + [self.args.span_mib * MiB])
        size = span * max(w["threads"] for w in wl)
        env = envs.clean_env(fabric_env(self.args) if protocol == "fabric" else None)
        worker = str(HERE / "worker_te.py")
        tag = f"te-{system}-{protocol}"
        self.log(f"{label}: starting target and initiator ({len(wl)} workloads)")
        target = procs.Worker([python, worker, "target", "--protocol", protocol, "--size", str(size)],
                              self.logs / f"{tag}-target.log", env)
        init = None
        try:
            try:
                ready = target.next(timeout=60)
            except TimeoutError:
                ready = None
            if not ready or not ready.get("ready"):
                why = (ready or {}).get("fatal") or f"target did not start: {target.tail()}"
                self.log(f"  {label}: {why}")
                self.results.append({**base, "error": why})
                return
            init = procs.Worker([python, worker, "initiator", "--protocol", protocol,
                                 "--target", ready["session"], "--remote-addr", str(ready["addr"]),
                                 "--remote-size", str(ready["size"]), "--span", str(span),
                                 "--workloads", json.dumps(wl)],
                                self.logs / f"{tag}-initiator.log", env)

            def fmt(r):
                return (f"{r.get('op', '?'):5} {human(r.get('block', 0)):>7} x{r.get('threads', '?')}: "
                        + self._fmt_res(r))

            first = None
            try:
                first = init.next(timeout=120)
            except TimeoutError:
                pass
            if not first or not first.get("verified"):
                why = (first or {}).get("fatal") or f"initiator failed: {init.tail()}"
                self.log(f"  {label}: {why}")
                self.results.append({**base, "error": why})
                return
            self._collect(init, base, label, fmt, len(wl))
        finally:
            if init:
                init.stop()
            target.stop()

    # ---- store -------------------------------------------------------------------------------

    def run_store(self, system, python, protocol, master_bin=None, redis_port=None):
        label = f"store {system}/{protocol}"
        base = {"bench": "store", "system": system, "protocol": protocol}
        worker = str(HERE / "worker_store.py")
        env = envs.clean_env()
        tag = f"store-{system}-{protocol}"
        seg = self.args.segment_mib * MiB
        started = []
        try:
            if system == "redis":
                wl = self.store_workloads(zc_ok=False)
                extra = ["--backend", "redis", "--redis-port", str(redis_port)]
            else:
                wl = self.store_workloads()
                port, mport = procs.free_port(), procs.free_port()
                self.log(f"{label}: starting mooncake_master on 127.0.0.1:{port}")
                master = procs.Server([master_bin, f"--port={port}", "--rpc_address=127.0.0.1",
                                       f"--metrics_port={mport}"], port, self.logs / f"{tag}-master.log",
                                      env)
                started.append(master)
                if master.error:
                    why = f"mooncake_master {master.error}"
                    self.log(f"  {label}: {why}")
                    self.results.append({**base, "error": why})
                    return
                extra = ["--master", f"127.0.0.1:{port}", "--protocol", protocol]
                holder_env = envs.clean_env(envs.OURS_HOLDER_ENV) if system == "ours" else env
                holder = procs.Worker([python, worker, "holder", *extra, "--segment", str(seg)],
                                      self.logs / f"{tag}-holder.log", holder_env)
                started.append(holder)
                try:
                    ready = holder.next(timeout=60)
                except TimeoutError:
                    ready = None
                if not ready or not ready.get("ready"):
                    why = (ready or {}).get("fatal") or f"storage client did not start: {holder.tail()}"
                    self.log(f"  {label}: {why}")
                    self.results.append({**base, "error": why})
                    return
            self.log(f"{label}: driver running {len(wl)} workloads")
            driver = procs.Worker([python, worker, "driver", *extra,
                                   "--pool-bytes", str(seg * 3 // 8), "--workloads", json.dumps(wl)],
                                  self.logs / f"{tag}-driver.log", env)
            started.insert(0, driver)
            try:
                ready = driver.next(timeout=60)
            except TimeoutError:
                ready = None
            if not ready or not ready.get("ready"):
                why = (ready or {}).get("fatal") or f"client did not start: {driver.tail()}"
                self.log(f"  {label}: {why}")
                self.results.append({**base, "error": why})
                return

            def fmt(r):
                mode = ("batch" + str(r.get("batch")) if r.get("batch", 1) > 1 else "single") + (
                    " zc" if r.get("zc") else "")
                return f"{r.get('op', '?'):3} {human(r.get('size', 0)):>7} {mode:12}: " + self._fmt_res(r)

            self._collect(driver, base, label, fmt, len(wl))
        finally:
            for p in started:
                t = time.monotonic()
                p.stop()
                if time.monotonic() - t > 2:
                    self.log(f"  {label}: stopping {Path(p.log_path).stem} took "
                             f"{time.monotonic() - t:.1f} s")

    def run_redis(self, info, tools_py):
        port = procs.free_port()
        label = "store redis"
        self.log(f"{label}: starting redis-server on 127.0.0.1:{port} (no persistence)")
        srv = procs.Server([info["server"], "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
                            "--dir", str(self.logs)],
                           port, self.logs / "redis-server.log", envs.clean_env())
        try:
            if srv.error:
                self.results.append({"bench": "store", "system": "redis", "protocol": "resp",
                                     "error": f"redis-server {srv.error}"})
                self.log(f"  {label}: redis-server {srv.error}")
                return
            self.run_store("redis", tools_py, "resp", redis_port=port)
        finally:
            srv.stop()

    # ---- the whole run -------------------------------------------------------------------------

    def setup(self):
        a = self.args
        want = set(a.systems)
        if "ours" in want:
            self.log("setup: our build")
            info = envs.probe_ours(a.ours_python)
            self.systems["ours"] = info
            if info["status"] != "ok":
                self.log(f"  ours unavailable: {info['reason']}")
            else:
                self.log(f"  ours {info['version']} from {info['package_dir']} "
                         f"(engine {'ok' if info['engine'] else 'MISSING'}, "
                         f"store {'ok' if info['store'] else 'MISSING'})")
        if "reference" in want:
            self.log(f"setup: reference Mooncake ({envs.REFERENCE_DIST}=={envs.REFERENCE_VERSION})")
            info = envs.ensure_reference(self.build, a, self.log)
            self.systems["reference"] = info
            if info["status"] != "ok":
                self.log(f"  reference unavailable: {info['reason']}")
            else:
                self.log(f"  reference {info['version']} in {info['python_path']}")
        self.tools = {"status": "unavailable", "reason": "not needed"}
        if "redis" in want:
            self.log("setup: python Redis client (redis-py, hiredis)")
            self.tools = envs.ensure_tools(self.build, a, self.log, ["redis", "hiredis"])
        self.plot_tools = {"status": "unavailable", "reason": "--no-plots given"}
        if not a.no_plots:
            self.log("setup: matplotlib")
            self.plot_tools = envs.ensure_tools(self.build, a, self.log, ["matplotlib"])
            if self.plot_tools["status"] != "ok":
                self.log(f"  no plots: {self.plot_tools['reason']}")
        if "redis" in want:
            self.log("setup: Redis")
            info = envs.ensure_redis(a, self.log)
            if info["status"] == "ok" and self.tools["status"] != "ok":
                info = {"status": "unavailable", "reason": f"no redis-py client: {self.tools['reason']}"}
            self.systems["redis"] = info
            if info["status"] != "ok":
                self.log(f"  redis unavailable: {info['reason']}")
            else:
                self.log(f"  redis-server {info['version']}")

    def measure(self):
        a = self.args
        self.log("limits: memcpy (1 MiB blocks) and one TCP stream (iperf3 where installed)")
        bundled = self.systems.get("ours", {}).get("mc_limits")
        self.limits = limits.measure(a.limit_duration, bundled, REPO, log=self.log)
        for k, v in self.limits.items():
            self.log(f"  {k:6}: {v['gbps']:.2f} GB/s  [{v['source']}]")
        ours = self.systems.get("ours", {})
        ref = self.systems.get("reference", {})
        te_runs = []
        if ours.get("status") == "ok":
            if ours.get("engine"):
                te_runs += [("ours", ours["python_path"], p) for p in a.te_protocols]
            else:
                self.results.append({"bench": "te", "system": "ours", "error": ours["engine_reason"]})
        if ref.get("status") == "ok" and ref.get("engine"):
            te_runs.append(("reference", ref["python_path"], "tcp"))
        elif ref.get("status") == "ok":
            self.results.append({"bench": "te", "system": "reference", "error": ref["engine_reason"]})
        if "te" in a.benches:
            for system, py, proto in te_runs:
                self.run_te(system, py, proto)
        if "store" in a.benches:
            if ours.get("status") == "ok":
                if ours.get("store"):
                    for p in a.store_protocols:
                        self.run_store("ours", ours["python_path"], p, master_bin=ours["master"])
                else:
                    self.results.append({"bench": "store", "system": "ours", "error": ours["store_reason"]})
            if ref.get("status") == "ok":
                if ref.get("store"):
                    self.run_store("reference", ref["python_path"], "tcp", master_bin=ref["master"])
                else:
                    self.results.append({"bench": "store", "system": "reference",
                                         "error": ref["store_reason"]})
            if self.systems.get("redis", {}).get("status") == "ok":
                self.run_redis(self.systems["redis"], self.tools["python_path"])

    def limits_again(self):
        """Measure the limits a second time after the systems and keep the best of each: on a
        shared machine a limit taken during someone else's burst would flatter every ratio."""
        self.log("limits again (the best of both measurements is used for the ratios)")
        bundled = self.systems.get("ours", {}).get("mc_limits")
        again = limits.measure(self.args.limit_duration, bundled, REPO, log=self.log)
        for k, v in again.items():
            first = self.limits.get(k)
            if not first:
                self.limits[k] = {**v, "samples_gbps": [v["gbps"]]}
                continue
            samples = first.get("samples_gbps", [first["gbps"]]) + [v["gbps"]]
            best = first if first["gbps"] >= v["gbps"] else v
            self.limits[k] = {**best, "gbps": max(samples), "samples_gbps": samples}
            self.log(f"  {k:6}: {v['gbps']:.2f} GB/s now, {max(samples):.2f} GB/s used")

    def facts(self):
        cpu = "unknown"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        mem = None
        try:
            for line in open("/proc/meminfo"):
                if line.startswith("MemTotal"):
                    mem = int(line.split()[1]) * 1024
        except OSError:
            pass
        return {"cpu_model": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                "os": platform.platform(), "memory_bytes": mem, "hostname_hidden": True}

    def versions(self):
        v = {"harness_python": sys.version.split()[0]}
        if self.commit:
            v["repo_commit"] = self.commit
        for name, info in self.systems.items():
            if info.get("status") == "ok":
                v[name] = info.get("version")
                if info.get("python"):
                    v[f"{name}_python"] = info["python"]
        if "reference" in self.systems:
            v["reference_pinned"] = f"{envs.REFERENCE_DIST}=={envs.REFERENCE_VERSION}"
        if self.tools.get("status") == "ok":
            v.update({f"py:{k}": x for k, x in envs.tool_versions(
                self.tools["python_path"], ["redis", "hiredis"]).items() if x})
        if self.plot_tools.get("status") == "ok":
            v.update({f"py:{k}": x for k, x in envs.tool_versions(
                self.plot_tools["python_path"], ["matplotlib"]).items() if x})
        for src in {x.get("source", "") for x in self.limits.values()}:
            if src:
                v.setdefault("limits_tools", []).append(src)
        for lim in self.limits.values():
            cmd = lim.get("command", "").split()
            if cmd and "mc_limits" in cmd[0]:
                r = subprocess.run([cmd[0], "--version"], capture_output=True, text=True)
                v["mc_limits"] = (r.stdout.strip().splitlines() or ["?"])[0]
        for name, info in self.systems.items():
            if info.get("status") == "ok" and info.get("master"):
                try:
                    r = subprocess.run([info["master"], "--version"], capture_output=True, text=True,
                                       timeout=10)
                    out = (r.stdout + r.stderr).strip().splitlines()
                    v[f"{name}_mooncake_master"] = "; ".join(out) if out and r.returncode == 0 else "no --version"
                except (OSError, subprocess.TimeoutExpired):
                    pass
        if shutil.which("iperf3"):
            r = subprocess.run(["iperf3", "--version"], capture_output=True, text=True)
            v["iperf3"] = (r.stdout.splitlines() or ["?"])[0]
        return v

    def finish(self):
        a = self.args
        doc = {
            "schema": 1,
            "started": self.started,
            "elapsed_s": time.monotonic() - self.t0,
            "settings": {"quick": a.quick, "duration_s": a.duration, "systems": a.systems,
                         "benches": a.benches, "te_protocols": a.te_protocols,
                         "store_protocols": a.store_protocols, "segment_mib": a.segment_mib,
                         "span_mib": a.span_mib, "fabric_provider": a.fabric_provider,
                         "te_blocks": self.te_blocks(), "store_sizes": self.store_sizes(),
                         "store_batches": {str(s): self.batch_for(s) for s in self.store_sizes()},
                         "repeats": a.repeats, "command": a.command},
            "machine": self.facts(),
            "versions": self.versions(),
            "limits": self.limits,
            "systems": {k: {kk: vv for kk, vv in v.items() if kk in (
                "status", "reason", "version", "engine", "store", "engine_reason", "store_reason",
                "python", "pinned", "note")} for k, v in self.systems.items()},
            "results": self.results,
        }
        if self.fair is not None:
            doc["fair"] = self.fair
        doc["ratios"] = report.ratios(doc)
        if self.fair is not None:
            self.fair["reference_asked"] = "reference" in a.systems
            doc["fair_targets"] = report.fair_targets(doc)
        md = report.markdown(doc)
        doc["tables"] = "results.md"
        plots = []
        if a.no_plots:
            doc["plots_skipped"] = "--no-plots given"
        elif self.plot_tools.get("status") != "ok":
            doc["plots_skipped"] = f"matplotlib not available: {self.plot_tools.get('reason')}"
        doc["plots"] = plots
        (self.out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
        if "plots_skipped" not in doc:
            r = subprocess.run([self.plot_tools["python_path"], str(HERE / "plots.py"),
                                str(self.out / "results.json"), str(self.out)],
                               capture_output=True, text=True, env=envs.clean_env({"MPLBACKEND": "Agg"}))
            if r.returncode == 0:
                doc["plots"] = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().endswith(".png")]
            else:
                doc["plots_skipped"] = f"plotting failed: {envs._last_line(r.stderr)}"
        doc["elapsed_s"] = time.monotonic() - self.t0
        (self.out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
        md = report.markdown(doc)
        (self.out / "results.md").write_text(md)
        print()
        print(md)
        self.log(f"done in {doc['elapsed_s']:.0f} s: {self.out}/results.json, results.md"
                 + (f", {len(doc['plots'])} plots" if doc["plots"] else f" (no plots: {doc.get('plots_skipped')})"))
        return doc


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI smoke: fewer sizes, short runs (< 2 min)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma list of ours,reference,redis (default: all)")
    ap.add_argument("--bench", dest="benches", default="te,store", help="comma list of te,store")
    ap.add_argument("--out", help="output directory (default bench-results/<timestamp>)")
    ap.add_argument("--duration", type=float, help="seconds per workload (default 1.0; --quick 0.2)")
    ap.add_argument("--limit-duration", type=float, help="seconds per limit (default 2; --quick 0.5)")
    ap.add_argument("--ours-python", default=sys.executable,
                    help="interpreter that has our mooncake installed (default: this one)")
    ap.add_argument("--reference-python",
                    help="interpreter with the reference Mooncake already installed "
                         "(default: build/compare/ref-venv, created and pinned by the harness)")
    ap.add_argument("--te-protocols", default="auto",
                    help="our TE protocols (default: tcp,shm, and fabric where libfabric.so.1 loads)")
    ap.add_argument("--fabric-provider",
                    help="libfabric provider of our fabric runs (MC_FABRIC_PROVIDER; default: that "
                         "variable when set, else libfabric's own pick where an RDMA device exists "
                         "and its tcp provider where none does)")
    ap.add_argument("--store-protocols", default="tcp,shm", help="our store protocols (default tcp,shm)")
    ap.add_argument("--segment-mib", type=int, default=256, help="storage client segment size")
    ap.add_argument("--span-mib", type=int, default=64,
                    help="TE: bytes each thread walks through, so blocks are not cache-hot (default 64)")
    ap.add_argument("--build-dir", default=str(REPO / "build" / "compare"),
                    help="where the reference and tools venvs live (default build/compare)")
    ap.add_argument("--no-install", action="store_true",
                    help="install nothing (reference venv, pip tools, Debian packages)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--repeats", type=int,
                    help="alternating repeats of the fair baselines (ours, baselines, ours, ...); "
                         "default 3, --quick 1")
    ap.add_argument("--no-fair", action="store_true",
                    help="skip the fair baselines (C store bench, redis-benchmark, iperf3, dd)")
    ap.add_argument("--no-disk", action="store_true", help="skip the disk tier vs dd rows")
    ap.add_argument("--disk-dir",
                    help="file system of the disk tier vs dd rows (default: --build-dir's)")
    a = ap.parse_args(argv)
    a.command = "python -m benchmarks.compare " + " ".join(argv)
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    bad = [s for s in a.systems if s not in SYSTEMS]
    if bad:
        ap.error(f"unknown system(s) {bad}; choose from {', '.join(SYSTEMS)}")
    a.benches = [s.strip() for s in a.benches.split(",") if s.strip()]
    if any(b not in ("te", "store") for b in a.benches):
        ap.error("--bench takes te and/or store")
    if a.te_protocols == "auto":
        a.te_protocols = "tcp,shm,fabric" if have_libfabric() else "tcp,shm"
    a.te_protocols = [p.strip() for p in a.te_protocols.split(",") if p.strip()]
    if a.fabric_provider is None:
        a.fabric_provider = os.environ.get("MC_FABRIC_PROVIDER") or ("" if have_rdma_device() else "tcp")
    a.store_protocols = [p.strip() for p in a.store_protocols.split(",") if p.strip()]
    if a.duration is None:
        a.duration = 0.2 if a.quick else 1.0
    if a.limit_duration is None:
        a.limit_duration = 0.5 if a.quick else 2.0
    if a.duration <= 0 or a.limit_duration <= 0:
        ap.error("durations must be positive")
    if a.repeats is None:
        a.repeats = 1 if a.quick else 3
    if a.repeats < 1 or a.repeats > 20:
        ap.error("--repeats takes 1..20")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    a.out = a.out or str(REPO / "bench-results" / stamp)
    return a


def repo_commit():
    try:
        r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return r.stdout.strip() + ("+dirty" if dirty else "") if r.returncode == 0 else None
    except OSError:
        return None


def have_libfabric():
    """Whether our fabric transport can start here at all (it dlopens libfabric.so.1)."""
    import ctypes
    try:
        ctypes.CDLL("libfabric.so.1")
        return True
    except OSError:
        return False


def have_rdma_device():
    """An RDMA device (verbs; efa and cxi show up there too) for libfabric to pick."""
    d = "/sys/class/infiniband"
    return os.path.isdir(d) and bool(os.listdir(d))


def fabric_env(args):
    """Environment of our fabric workers: the provider (clean_env drops every MC_ variable)."""
    return {"MC_FABRIC_PROVIDER": args.fabric_provider} if args.fabric_provider else {}


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    run = Run(args)
    run.started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    run.log(f"benchmarks.compare -> {run.out}  (systems: {', '.join(args.systems)}"
            f"{', quick' if args.quick else ''})")
    run.setup()
    run.measure()
    if not args.no_fair:
        run.fair = fair.Fair(run).measure()
    run.limits_again()
    run.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
