"""The comparison harness (benchmarks/compare) in --quick mode against our own build and the fair
baselines (redis-benchmark, one iperf3 stream, memcpy, dd iflag=direct).

It starts real processes (TE target + initiator, mooncake_master + storage client + client,
mc_store_bench's client processes, redis-server) over loopback, so it also exercises our engine
and store end to end. It installs nothing (--no-install) and has no speed threshold: it fails when
the harness crashes, a workload fails, a baseline row is missing, or the numbers it reports are
not sane (non-positive, non-finite, inconsistent with each other or with the ratios).
"""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
KiB, MiB = 1 << 10, 1 << 20


def _close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def _positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "res"
    # redis: the fair baselines' redis-benchmark (its Python-level rows need redis-py, which
    # --no-install does not fetch: they are reported as not run when it is missing)
    cmd = [sys.executable, "-m", "benchmarks.compare", "--quick", "--systems", "ours,redis",
           "--no-install", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"harness failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    doc = json.loads((out / "results.json").read_text())
    return out, doc, proc.stdout


def test_progress_and_files(quick_run):
    out, doc, stdout = quick_run
    assert "limits: memcpy" in stdout  # progress lines while it runs
    assert "te ours/tcp" in stdout and "store ours/tcp" in stdout
    # the fabric transport runs by default wherever libfabric.so.1 loads (CI installs it), over
    # libfabric's tcp provider on a host without an RDMA device
    from benchmarks.compare import run
    assert ("fabric" in doc["settings"]["te_protocols"]) == run.have_libfabric()
    if run.have_libfabric():
        assert "te ours/fabric" in stdout
        assert doc["settings"]["fabric_provider"] == ("" if run.have_rdma_device() else "tcp")
    assert (out / "results.md").is_file()
    assert doc["schema"] == 1
    assert doc["settings"]["quick"] is True
    assert doc["elapsed_s"] > 0


def test_machine_facts_and_versions(quick_run):
    _, doc, _ = quick_run
    m = doc["machine"]
    assert isinstance(m["cpu_model"], str) and m["cpu_model"]
    assert isinstance(m["cores"], int) and m["cores"] >= 1
    assert isinstance(m["kernel"], str) and m["kernel"]
    v = doc["versions"]
    assert v["ours"] == doc["systems"]["ours"]["version"]
    assert v["harness_python"].count(".") == 2
    assert set(doc["systems"]) == {"ours", "redis"}  # nothing else was asked for
    assert doc["systems"]["ours"]["status"] == "ok"


def test_limits_sane(quick_run):
    _, doc, _ = quick_run
    for name in ("memcpy", "tcp"):
        lim = doc["limits"][name]
        assert _positive(lim["gbps"]), lim
        assert lim["source"]


def test_every_workload_ran_and_is_consistent(quick_run):
    _, doc, _ = quick_run
    res = [r for r in doc["results"] if r["system"] == "ours"]  # Python-level rows of ours
    errors = [r for r in doc["results"] if "error" in r]
    assert not errors, errors
    s = doc["settings"]
    te = [r for r in res if r["bench"] == "te"]
    want_te = {(p, op, t, b) for p in s["te_protocols"] for op in ("read", "write") for t in (1, 2)
               for b in s["te_blocks"]}
    assert {(r["protocol"], r["op"], r["threads"], r["block"]) for r in te} == want_te
    st = [r for r in res if r["bench"] == "store"]
    want_st = {(p, op, sz, batched, zc) for p in s["store_protocols"] for op in ("put", "get")
               for sz in s["store_sizes"] for batched in (False, True) for zc in (False, True)}
    assert {(r["protocol"], r["op"], r["size"], r["batch"] > 1, r["zc"]) for r in st} == want_st
    for r in res:
        assert r["system"] == "ours"
        size = r["block"] if r["bench"] == "te" else r["size"]
        for k in ("gbps", "ops_per_s", "p50_us", "p99_us", "wall_s", "ops", "bytes"):
            assert _positive(r[k]), (k, r)
        assert r["bytes"] == r["ops"] * size, r
        assert r["p50_us"] <= r["p99_us"] <= r["max_us"], r
        assert r["min_us"] <= r["p50_us"], r
        secs = r["wall_s"] if r["bench"] == "te" else r["busy_s"]
        assert _close(r["gbps"], r["bytes"] / secs / 1e9), r
        assert _close(r["ops_per_s"] * size, r["gbps"] * 1e9), r
        if r["bench"] == "store":
            assert r["ops"] == r["calls"] * r["batch"], r
            assert r["busy_s"] <= r["wall_s"] * 1.0001, r


def test_ratios_match_raw_numbers(quick_run):
    _, doc, _ = quick_run
    rats = doc["ratios"]
    lim = doc["limits"]
    ours = [r for r in doc["results"] if r["system"] == "ours"]
    # every one of our results has its limit ratio; nothing compares against a system not run
    assert len([q for q in rats if q["vs"].startswith("limit:")]) == len(ours)
    redis_ran = any(r["system"] == "redis" for r in doc["results"])
    assert all(q["vs"].startswith("limit:") or (redis_ran and q["vs"] == "redis") for q in rats)
    rats = [q for q in rats if q["vs"].startswith("limit:")]
    for q in rats:
        assert _positive(q["ratio"]) and _close(q["ratio"], q["ours_gbps"] / q["other_gbps"]), q
        lname = "memcpy" if q["protocol"] == "shm" else "tcp"  # tcp, and fabric (tcp provider)
        want = lim[lname]["gbps"]
        assert q["vs"] == f"limit:{lname}"
        assert _close(q["other_gbps"], want), q
        src = [r for r in ours if r["bench"] == q["bench"] and r["protocol"] == q["protocol"]
               and r["op"] == q["op"] and r.get("block", r.get("size")) == q["size"]
               and r.get("threads") == q["threads"] and r.get("batch") == q["batch"]
               and r.get("zc") == q["zc"]]
        assert len(src) == 1 and _close(src[0]["gbps"], q["ours_gbps"]), q


def test_markdown_tables_well_formed(quick_run):
    out, doc, stdout = quick_run
    md = (out / "results.md").read_text()
    assert md in stdout  # the same tables went to stdout
    assert "### TE write, 1 thread" in md and "### Store get, batched, zero-copy" in md
    tables = 0
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            header = lines[i - 1]
            ncol = header.count("|")
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert lines[j].count("|") == ncol, (header, lines[j])
                j += 1
            assert j > i + 1, f"empty table under {header}"
            tables += 1
    te_tables = 2 * 2  # op x threads
    st_tables = 2 * 2 * 2  # op x batched x zero-copy
    fair_tables = 3 + len({q["target"] for q in doc["fair_targets"]})  # limits, ours, sweep + targets
    assert tables == 2 + te_tables + st_tables + fair_tables  # + limits and systems tables
    # every limit ratio printed in a TE tcp table is the JSON's, to two decimals
    q = next(q for q in doc["ratios"] if q["bench"] == "te" and q["protocol"] == "tcp"
             and q["op"] == "write" and q["threads"] == 1 and q["size"] == 4 * KiB)
    row = next(ln for ln in md.split("### TE write, 1 thread")[1].splitlines() if ln.startswith("| 4 KiB"))
    cells = [c.strip() for c in row.split("|")]
    printed = [float(c) for c in cells[3:] if c.replace(".", "", 1).isdigit()]
    assert any(abs(x - q["ratio"]) <= 0.5 * 10 ** -(len(str(x).split(".")[1])) + 1e-9 for x in printed), \
        (row, q["ratio"])


def test_plots_or_reason(quick_run):
    out, doc, _ = quick_run
    if importlib.util.find_spec("matplotlib") is not None:
        assert "plots_skipped" not in doc, doc.get("plots_skipped")
    if "plots_skipped" in doc:
        assert doc["plots"] == [] and "matplotlib" in doc["plots_skipped"]
        return
    assert sorted(doc["plots"]) == ["latency.png", "store_throughput.png", "sweep.png", "te_throughput.png"]
    for p in doc["plots"]:
        data = (out / p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_bad_arguments_are_refused():
    for argv in (["--systems", "ours,nosuch"], ["--bench", "disk"], ["--duration", "0"], ["--repeats", "0"]):
        proc = subprocess.run([sys.executable, "-m", "benchmarks.compare", *argv], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert "error:" in proc.stderr


def test_unavailable_system_is_reported_and_the_rest_runs(tmp_path):
    """The reference cannot be installed (--no-install, empty build dir): it is reported with the
    reason, and our TE still runs and reports."""
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "benchmarks.compare", "--quick", "--systems", "ours,reference",
           "--bench", "te", "--te-protocols", "tcp", "--duration", "0.05", "--no-install",
           "--no-fair", "--no-plots", "--build-dir", str(tmp_path / "build"), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    ref = doc["systems"]["reference"]
    assert ref["status"] == "unavailable" and "--no-install" in ref["reason"]
    assert "reference | **not run**" in (out / "results.md").read_text()
    te = [r for r in doc["results"] if r["bench"] == "te"]
    assert te and all(r["system"] == "ours" and "error" not in r for r in te)
    assert not any(q["vs"] == "reference" for q in doc["ratios"])
    assert doc["plots"] == [] and doc["plots_skipped"] == "--no-plots given"


def _rec(bench, system, protocol, op, size, gbps, **kw):
    r = {"bench": bench, "system": system, "protocol": protocol, "op": op, "gbps": gbps,
         "ops_per_s": gbps * 1e9 / size, "p50_us": 10.0, "p99_us": 20.0, **kw}
    r["block" if bench == "te" else "size"] = size
    return r


def test_ratios_against_reference_and_redis_are_like_for_like():
    """The ratio rules on a synthetic document (offline: no reference or Redis needed)."""
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.compare import report
    finally:
        sys.path.remove(str(REPO))
    res = [
        _rec("te", "ours", "tcp", "write", MiB, 3.0, threads=1),
        _rec("te", "ours", "shm", "write", MiB, 9.0, threads=1),
        _rec("te", "reference", "tcp", "write", MiB, 2.0, threads=1),
        _rec("te", "reference", "tcp", "write", MiB, 5.0, threads=2),  # other thread count
        _rec("store", "ours", "tcp", "get", MiB, 4.0, batch=8, zc=True),
        _rec("store", "ours", "tcp", "get", MiB, 2.0, batch=8, zc=False),
        _rec("store", "reference", "tcp", "get", MiB, 1.0, batch=8, zc=True),
        _rec("store", "reference", "tcp", "get", MiB, 0.5, batch=8, zc=False),
        _rec("store", "redis", "resp", "get", MiB, 0.8, batch=8, zc=False),
        {"bench": "store", "system": "reference", "protocol": "tcp", "error": "boom"},
    ]
    doc = {"results": res, "limits": {"tcp": {"gbps": 6.0, "source": "x"},
                                      "memcpy": {"gbps": 18.0, "source": "y"}},
           "machine": {"cpu_model": "cpu", "cores": 2, "kernel": "k"}, "systems": {}}
    rats = {(q["bench"], q["protocol"], q.get("zc"), q["vs"]): q["ratio"] for q in report.ratios(doc)}
    assert rats == {
        ("te", "tcp", None, "reference"): 3.0 / 2.0,
        ("te", "tcp", None, "limit:tcp"): 3.0 / 6.0,
        ("te", "shm", None, "limit:memcpy"): 9.0 / 18.0,  # no reference shm: no ref ratio
        ("store", "tcp", True, "reference"): 4.0 / 1.0,
        ("store", "tcp", True, "redis"): 4.0 / 0.8,  # Redis has no zero-copy: its plain numbers
        ("store", "tcp", True, "limit:tcp"): 4.0 / 6.0,
        ("store", "tcp", False, "reference"): 2.0 / 0.5,
        ("store", "tcp", False, "redis"): 2.0 / 0.8,
        ("store", "tcp", False, "limit:tcp"): 2.0 / 6.0,
    }
    doc["ratios"] = report.ratios(doc)
    md = report.markdown(doc)
    assert "| 1 MiB | 3.00 GB/s" in md and "| 1.50 | 0.50 |" in md
    assert "boom" in md  # failures are listed, not dropped


# ---- the fair baselines (issue 26) ----------------------------------------------------------------

def _fair_keys(fair, system, kind):
    return {(r.get("op"), r.get("size"), r.get("batch"), r.get("procs"), bool(r.get("zc")))
            for r in fair["records"] if r["system"] == system and r["kind"] == kind and "error" not in r}


def test_fair_baseline_rows_present_and_well_formed(quick_run):
    """Every baseline of the fair section ran: a missing one fails here, with its reason."""
    _, doc, stdout = quick_run
    fair = doc["fair"]
    assert fair["missing"] == [], fair["missing"]
    errors = [r for r in fair["records"] if "error" in r]
    assert not errors, errors
    assert fair["repeats"] == 1 and doc["settings"]["repeats"] == 1
    for la in (fair["loadavg_start"], fair["loadavg_end"]):
        assert len(la) == 3 and all(x >= 0 for x in la)
    assert "fair baselines: 1 alternating repeat(s), load average" in stdout
    procs, sizes, large = fair["procs"], fair["sizes"], fair["large"]
    assert procs == [1, 2] and sizes == [KiB * 4] and large == [MiB]
    batch = {int(k): v for k, v in fair["batch"].items()}
    want_ours = {(op, sz, b, n, False) for op in ("put", "get_cached", "get_first") for sz in sizes
                 for b in (1, batch[sz]) for n in procs}
    want_ours |= {(op, sz, 1, 1, zc) for op in ("put", "get_cached", "get_first") for sz in large
                  for zc in (False, True)}
    assert _fair_keys(fair, "ours-c", "store") == want_ours
    assert _fair_keys(fair, "redis-c", "store") == {(op, sz, b, n, False) for op in ("put", "get")
                                                   for sz in sizes for b in (1, batch[sz]) for n in procs}
    # the same shape as ours beside it: one redis-benchmark process per client, single calls
    assert _fair_keys(fair, "redis-c-procs", "store") == {(op, sz, 1, n, False) for op in ("put", "get")
                                                         for sz in sizes for n in procs if n > 1}
    assert _fair_keys(fair, "ours-c", "te") == {(op, 16 * MiB, 1, 1, False) for op in ("read", "write")}
    for system, kind in (("iperf3", "limit"), ("memcpy", "limit"), ("ours-disk", "disk"), ("dd-direct", "disk")):
        assert len([r for r in fair["records"] if r["system"] == system and r["kind"] == kind]) == 1, system
    assert fair["redis_benchmark"].startswith("redis-benchmark ")
    for r in fair["records"]:
        assert r["repeat"] == 1
        assert _positive(r["gbps"]), r
        if r["kind"] in ("store", "te", "disk"):
            assert _positive(r["ops_per_s"]) and _close(r["ops_per_s"] * r["size"], r["gbps"] * 1e9, 1e-3), r
        if r["kind"] in ("store", "te"):
            assert _positive(r["p50_us"]) and r["p50_us"] <= r["p99_us"], r
        if r["system"] == "ours-c" and r["kind"] == "store":
            assert r["ops"] == r["calls"] * r["batch"] and r["bytes"] == r["ops"] * r["size"], r
            assert r["min_us"] <= r["p50_us"] and r["p99_us"] <= r["max_us"], r
            assert r["busy_s"] <= r["wall_s"] * 1.0001, r
        if r["system"] == "redis-c":
            assert "-t " + ("set" if r["op"] == "put" else "get") in r["command"]
            assert f"-d {r['size']}" in r["command"] and f"-c {r['procs']}" in r["command"]
            assert f"-P {r['batch']}" in r["command"]
        if r["system"] == "redis-c-procs":
            assert r["command"].startswith(f"{r['procs']} x (") and "-c 1 " in r["command"]


def test_fair_targets_follow_the_records(quick_run):
    out, doc, _ = quick_run
    fair, rows = doc["fair"], doc["fair_targets"]
    groups = {q["target"] for q in rows}
    assert groups == {"store vs Redis C client (>= 1.0x)", "aggregate at 2 procs vs 1 (>= 1.0x)",
                      "TE tcp vs one iperf3 stream (>= 0.9x)", "store get vs one iperf3 stream (>= 0.8x)",
                      "disk 64 KiB get vs dd iflag=direct (>= 0.7x)",
                      "informative: store vs Redis C client with one process per client, as ours (>= 1.0x)"}
    assert all(q["met"] is not None and len(q["ratios"]) == 1 for q in rows), rows
    # the same-shape Redis rows: single calls at more than one process only
    same = [q["what"] for q in rows if q["target"].startswith("informative")]
    assert sorted(same) == sorted(f"{op} 4 KiB single, 2 proc(s)" for op in ("put", "get_first", "get_cached"))

    def one(system, kind, **kw):
        return next(r for r in fair["records"] if r["system"] == system and r["kind"] == kind
                    and all(r.get(k) == v for k, v in kw.items()))

    q = next(q for q in rows if q["target"].startswith("store vs Redis") and q["what"] == "put 4 KiB single, 2 proc(s)")
    want = one("ours-c", "store", op="put", size=4 * KiB, batch=1, procs=2)["ops_per_s"] / \
        one("redis-c", "store", op="put", size=4 * KiB, batch=1, procs=2)["ops_per_s"]
    assert _close(q["median"], want) and q["met"] == (want >= 1.0)
    iperf = one("iperf3", "limit")["gbps"]
    q = next(q for q in rows if q["what"] == "read 16 MiB, one thread")
    assert _close(q["median"], one("ours-c", "te", op="read")["gbps"] / iperf) and q["goal"] == 0.9
    q = next(q for q in rows if q["target"].startswith("disk"))
    assert _close(q["median"], one("ours-disk", "disk")["gbps"] / one("dd-direct", "disk")["gbps"])
    md = (out / "results.md").read_text()
    assert "## Fair baselines (issue 26)" in md and "## Issue 26 targets" in md
    assert "multiplexes its `-c` clients in one process" in md
    assert "## Store, Python API" in md and "## Transfer Engine, Python API" in md
    for q in rows:
        verdict = "met" if q["met"] else f"missed by {(1 - q['median'] / q['goal']) * 100:.0f}%"
        assert f"| {q['what']} | {q['median']:.2f} | {q['ratios'][0]:.2f} | {verdict} |" in md, q


def test_fair_medians_and_spreads_offline():
    """Three alternating repeats on a synthetic document: ratios pair each repeat with the same
    repeat's baseline; the median and the min-max spread are printed; a missed target says by
    how much."""
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.compare import fair, report
    finally:
        sys.path.remove(str(REPO))
    recs = []
    for rep, (ours, red, ip) in enumerate(((10e3, 20e3, 4.0), (30e3, 20e3, 2.0), (16e3, 20e3, 4.0)), 1):
        for n in (1, 8):
            recs.append({"system": "ours-c", "kind": "store", "op": "put", "size": 4096, "batch": 1,
                         "procs": n, "zc": False, "ops_per_s": ours * n, "gbps": ours * n * 4096 / 1e9,
                         "repeat": rep})
            recs.append({"system": "redis-c", "kind": "store", "op": "put", "size": 4096, "batch": 1,
                         "procs": n, "zc": False, "ops_per_s": red, "gbps": red * 4096 / 1e9, "repeat": rep})
        recs.append({"system": "iperf3", "kind": "limit", "gbps": ip, "repeat": rep})
        recs.append({"system": "ours-c", "kind": "te", "op": "read", "size": 16 * MiB, "batch": 1, "procs": 1,
                     "gbps": 3.6, "ops_per_s": 3.6e9 / (16 * MiB), "repeat": rep})
        recs.append({"system": "redis-c", "kind": "store", "op": "get", "size": 4096, "batch": 1, "procs": 1,
                     "zc": False, "error": "boom", "repeat": rep})
    doc = {"fair": {"repeats": 3, "procs": [1, 8], "sizes": [4096], "large": [], "te_blocks": [16 * MiB],
                    "batch": {"4096": 32}, "missing": [], "records": recs, "reference_asked": False,
                    "loadavg_start": [1.0, 1.0, 1.0], "loadavg_end": [2.0, 2.0, 2.0]},
           "machine": {"cores": 2}}
    rows = {(q["target"], q["what"]): q for q in report.fair_targets(doc)}
    q = rows[("store vs Redis C client (>= 1.0x)", "put 4 KiB single, 1 proc(s)")]
    assert q["ratios"] == [0.5, 1.5, 0.8] and q["median"] == 0.8 and q["min"] == 0.5 and q["max"] == 1.5
    assert q["met"] is False and report._verdict(q) == "missed by 20%"
    q = rows[("store vs Redis C client (>= 1.0x)", "put 4 KiB single, 8 proc(s)")]
    assert q["median"] == 6.4 and q["met"] is True and report._verdict(q) == "met"
    q = rows[("aggregate at 8 procs vs 1 (>= 1.0x)", "put 4 KiB single")]
    assert q["ratios"] == [8.0, 8.0, 8.0] and q["met"] is True
    q = rows[("TE tcp vs one iperf3 stream (>= 0.9x)", "read 16 MiB, one thread")]
    assert q["ratios"] == [0.9, 1.8, 0.9] and q["met"] is True  # each repeat against its own iperf3
    q = rows[("store vs Redis C client (>= 1.0x)", "get_first 4 KiB single, 1 proc(s)")]
    assert q["ratios"] == [] and q["met"] is None and report._verdict(q) == "no data"  # failed rows
    md = "\n".join(report.fair_markdown(doc))
    assert "| put 4 KiB single, 1 proc(s) | 0.80 [0.50–1.50] | 0.50, 1.50, 0.80 | missed by 20% |" in md
    assert "| one iperf3 stream | 4.00 [2.00–4.00] | 4.00, 2.00, 4.00 |" in md
    assert "boom" in md
    assert "Load average at the start [1.0, 1.0, 1.0], at the end [2.0, 2.0, 2.0]" in md
    # parsers of the baselines' own output
    csv_text = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
                '"p99_latency_ms","max_latency_ms"\n"SET","25940.34","0.033","0.016","0.023","0.039",'
                '"0.167","6.527"\n')
    got = fair.parse_redis_csv(csv_text)
    assert got == [{"test": "SET", "rps": 25940.34, "avg_us": 33.0, "min_us": 16.0, "p50_us": 23.0,
                    "p95_us": 39.0, "p99_us": 167.0, "max_us": 6527.0}]
    assert fair.parse_redis_csv("ERROR: connection refused\n") == []
    line = "  size    65536 B round 1: get    321.9 MB/s | dd iflag=direct bs=65536 x1:    566.2 MB/s | ratio 0.57x"
    assert fair.parse_disk_round(line) == {"get": 321.9, "dd": 566.2}
    assert fair.parse_disk_round("size 65536 B: nothing") is None


def _store_bench():
    from mooncake.cli import binary_path
    return binary_path("mc_store_bench")


def test_store_bench_refuses_bad_arguments():
    for argv in (["--workloads=fly:4k"], ["--workloads=put:0"], ["--workloads=put:4k:0"],
                 ["--workloads=put:4k:1:gpu"], ["--workloads="], ["--procs=0"], ["--procs=65"],
                 ["--duration=0"], ["--role=other"], ["--role=holder", "--segment_size=0"], ["--bogus=1"]):
        proc = subprocess.run([_store_bench(), *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
        assert proc.stderr.strip(), argv


def test_store_bench_reports_an_unreachable_master():
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([_store_bench(), f"--master=127.0.0.1:{port}", "--json", "--procs=2",
                           "--workloads=put:4k"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    fatal = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert fatal and "did not start" in fatal[0]["fatal"], proc.stdout
