"""The comparison harness (benchmarks/compare) in --quick mode against our own build only.

It starts real processes (TE target + initiator, mooncake_master + storage client + client) over
loopback, so it also exercises our engine and store end to end. It installs nothing (--no-install)
and has no speed threshold: it fails when the harness crashes, a workload fails, or the numbers it
reports are not sane (non-positive, non-finite, inconsistent with each other or with the ratios).
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
    cmd = [sys.executable, "-m", "benchmarks.compare", "--quick", "--systems", "ours",
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
    assert set(doc["systems"]) == {"ours"}  # nothing else was asked for
    assert doc["systems"]["ours"]["status"] == "ok"


def test_limits_sane(quick_run):
    _, doc, _ = quick_run
    for name in ("memcpy", "tcp"):
        lim = doc["limits"][name]
        assert _positive(lim["gbps"]), lim
        assert lim["source"]


def test_every_workload_ran_and_is_consistent(quick_run):
    _, doc, _ = quick_run
    res = doc["results"]
    errors = [r for r in res if "error" in r]
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
    assert all(q["vs"].startswith("limit:") for q in rats)
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
    assert tables == 2 + te_tables + st_tables  # + limits and systems tables
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
    assert sorted(doc["plots"]) == ["latency.png", "store_throughput.png", "te_throughput.png"]
    for p in doc["plots"]:
        data = (out / p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_bad_arguments_are_refused():
    for argv in (["--systems", "ours,nosuch"], ["--bench", "disk"], ["--duration", "0"]):
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
           "--no-plots", "--build-dir", str(tmp_path / "build"), "--out", str(out)]
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
