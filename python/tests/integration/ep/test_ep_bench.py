"""benchmarks/ep_bench.py (docs/ep.md's benchmark) runs on 2 CPU ranks and prints every path's
row beside its memcpy baseline, the rows through the Transfer Engine included."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def test_ep_bench_runs_every_path_beside_memcpy():
    script = pathlib.Path(__file__).resolve().parents[4] / "benchmarks" / "ep_bench.py"
    out = subprocess.run(
        [sys.executable, str(script), "--ranks", "2", "--tokens", "3", "--hidden", "128", "--topk", "2",
         "--iters", "2", "--warmup", "0"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "MC_LOG_LEVEL": "error"},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 3 |")]
    assert [r.split("|")[3].strip() for r in rows] == ["te-tcp", "te-auto", "pg", "memcpy"], out.stdout
    for r in rows[:3]:  # every transport timed its calls and its rows alone
        cells = [c.strip() for c in r.split("|")]
        assert cells[4].endswith(" ms") and cells[5].endswith(" ms") and cells[8].endswith(" ms"), r
