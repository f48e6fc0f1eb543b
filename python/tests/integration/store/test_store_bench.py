"""mooncake_store_bench runs end to end (own master + storage client) and rejects bad flags.
Speed is not asserted here (shared machines); the numbers live in docs/benchmarks.md."""

import re
import subprocess
import sys

BENCH = [sys.executable, "-m", "mooncake.cli.store_bench"]


def test_bench_runs_and_reports():
    r = subprocess.run(BENCH + ["--duration=0.5", "--value_size=64kb", "--batch=2",
                                "--operation=mixed", "--zero_copy", "--segment_size=32mb",
                                "--json"], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"ops/s \d+\.\d+ +GB/s \d+\.\d+ +latency per call p50 [\d.]+ us +p99 "
                     r"[\d.]+ us +p999 [\d.]+ us", out), out
    assert re.search(r"memcpy [\d.]+ GB/s, tcp stream [\d.]+ GB/s +ratio: [\d.]+x memcpy", out)
    assert "errors 0" in out


def test_bench_upsert_replaces_in_place_of_growing():
    """The upsert operation rewrites the same keys for the whole run: a segment far smaller than
    the bytes written still takes them all (every replaced value's space comes back)."""
    for batch, extra in ((1, []), (4, ["--zero_copy", "--batch=4"])):
        r = subprocess.run(BENCH + ["--duration=1", "--value_size=256kb", "--operation=upsert",
                                    "--segment_size=8mb", "--no_limits", *extra],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        assert "errors 0" in r.stdout, r.stdout
        calls = int(re.search(r"calls (\d+)", r.stdout).group(1))
        assert calls * batch * 256 * 1024 > 8 << 20, r.stdout  # more than the segment holds


def test_bench_rejects_bad_flags():
    for bad in (["--operation=scan"], ["--value_size=lots"], ["--batch=0"], ["--duration=-1"],
                ["--protocol=rdma"], ["--no_such_flag"]):
        r = subprocess.run(BENCH + bad, capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, bad
        assert "usage" in r.stderr


def test_bench_reports_unreachable_master():
    r = subprocess.run(BENCH + ["--master=127.0.0.1:1", "--duration=0.2", "--no_limits"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "-900" in r.stderr
