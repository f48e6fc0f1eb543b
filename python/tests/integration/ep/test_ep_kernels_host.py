"""mooncake-ep's kernels, their logic run on the CPU, against mooncake.ep's fallback.

The CUDA kernels (mooncake-ep/src/ep_kernels.cu) and the host reference (ep_host.c) run the same
per-element functions (mooncake-ep/include/mooncake_ep/ep_logic.h). These tests build the host
reference with the host's C compiler and load it the way ``Buffer`` loads the CUDA library, then
run dispatch and combine on 2 real gloo ranks (``MC_EP_KERNELS_WORLDS`` for more) through both paths and require byte-equal
outputs (rows, counts, src_info, layout_range, combined tokens, active-rank masks), on random
shapes, a full expert at the size-hint limit, a rank without tokens, inactive ranks and fp8.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the dev extra pins it

from ep_ranks import run_ranks  # noqa: E402

from mooncake.ep import Buffer, _kernels  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
SCENARIOS = ["random0", "random1", "random2", "random3", "random4", "random5", "limit_full_expert", "empty_rank",
             "inactive", "inactive_in_combine", "fp8", "zero_copy_out"]  # fmt: skip


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    """The host reference, built with the project's warning flags (errors) and no FMA contraction."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build mooncake-ep's host reference"
    out = tmp_path_factory.mktemp("epk") / "libmooncake_ep_host.so"
    subprocess.run(
        [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wstrict-prototypes", "-Wvla",
         "-ffp-contract=off", "-shared", "-fPIC", "-I", str(ROOT / "mooncake-ep/include"),
         "-o", str(out), str(ROOT / "mooncake-ep/src/ep_host.c")],
        check=True,
    )  # fmt: skip
    return str(out)


# 2 ranks in the suite (its budget); more with MC_EP_KERNELS_WORLDS=2,3,4 (a longer run).
WORLDS = [int(w) for w in os.environ.get("MC_EP_KERNELS_WORLDS", "2").split(",") if w.strip()]


@pytest.fixture(scope="module", params=WORLDS, ids=[f"{w}ranks" for w in WORLDS])
def ranks(request, host_lib, tmp_path_factory):
    world = request.param
    out = tmp_path_factory.mktemp(f"epk{world}")
    env = {k: v for k, v in os.environ.items() if k != _kernels.ENV}
    logs = run_ranks(HERE / "ep_kernel_workers.py", world, out, [host_lib], env)
    results = []
    for r in range(world):
        path = out / f"kernels.{r}.json"
        assert path.exists(), "\n".join(logs)
        results.append(json.loads(path.read_text()))
    return world, results


@pytest.mark.parametrize("name", SCENARIOS)
def test_kernels_match_fallback(ranks, name):
    world, results = ranks
    rows = 0
    for r, res in enumerate(results):
        case = res[name]
        assert "error" not in case, f"rank {r}: {case.get('error')}"
        # dispatch and combine on the fallback, then both on the host reference kernels
        assert case["paths"] == ["fallback", "fallback", "host reference kernels", "host reference kernels"]
        assert case["differ"] == [], f"rank {r}: kernels and fallback differ in {case['differ']}"
        rows += case["rows"]
    if name == "limit_full_expert":  # expert 0 got every rank's max_tokens rows: its whole capacity
        assert rows == world * 16
    else:
        assert rows > 0, "the scenario moved no rows: the comparison would prove nothing"


def test_cpu_tensors_take_the_fallback_without_a_named_library(monkeypatch):
    monkeypatch.delenv(_kernels.ENV, raising=False)
    assert _kernels.for_tensor(torch.zeros(1)) is None


def test_named_library_that_does_not_load_is_an_error(monkeypatch, tmp_path):
    bad = tmp_path / "not_a_library.so"
    bad.write_text("no ELF here")
    monkeypatch.setenv(_kernels.ENV, str(bad))
    with pytest.raises(RuntimeError, match=r"MC_EP_KERNELS_LIB: cannot load .*not_a_library\.so"):
        _kernels.for_tensor(torch.zeros(1))


def test_host_reference_serves_only_cpu_tensors(monkeypatch, host_lib):
    monkeypatch.setenv(_kernels.ENV, host_lib)
    kern = _kernels.for_tensor(torch.zeros(1))
    assert kern is not None and kern.device == "cpu" and kern.name == "host reference kernels"
    assert _kernels.for_tensor(torch.zeros(1, device="meta")) is None


def test_library_errors_surface_as_runtime_errors(monkeypatch, host_lib):
    monkeypatch.setenv(_kernels.ENV, host_lib)
    kern = _kernels.for_tensor(torch.zeros(1))
    idx = torch.tensor([[0, 9]], dtype=torch.int64)  # expert 9 of 4: past the routing's range
    with pytest.raises(RuntimeError, match="mc_ep_dispatch_count: expert id >= num_experts"):
        kern.dispatch_count(idx, 4)
    with pytest.raises(RuntimeError, match="mc_ep_dispatch_pack: num_experts must be a positive multiple of num_ranks"):
        kern.dispatch_pack(torch.zeros((1, 128), dtype=torch.bfloat16), idx, 4, 3, torch.zeros(4, dtype=torch.int32),
                           torch.zeros((1, 2), dtype=torch.int32), [True] * 3, 0)  # fmt: skip
    meta = torch.tensor([[5, 0]], dtype=torch.int64)  # local expert 5 of 2
    with pytest.raises(RuntimeError, match="mc_ep_dispatch_recv: a received row names no local expert"):
        kern.dispatch_recv(torch.zeros((1, 128), dtype=torch.bfloat16), meta, [1, 0], 2, 2, 8)
    over = torch.zeros((3, 2), dtype=torch.int64)  # three rows for expert 0, capacity 2
    with pytest.raises(RuntimeError, match="more rows than its capacity"):
        kern.dispatch_recv(torch.zeros((3, 128), dtype=torch.bfloat16), over, [3, 0], 1, 2, 2)


def test_path_is_logged_once_per_change(monkeypatch, host_lib, caplog):
    """One rank (gloo over a file store in this process): the log names the path that ran."""
    import torch.distributed as dist

    monkeypatch.setenv(_kernels.ENV, host_lib)
    assert not dist.is_initialized()
    dist.init_process_group("gloo", init_method=f"file://{Path(host_lib).parent / 'pg1'}", rank=0, world_size=1)
    try:
        _one_rank_round(dist.group.WORLD, host_lib, caplog)
    finally:
        dist.destroy_process_group()


def _one_rank_round(group, host_lib, caplog):
    buf = Buffer(group)
    x = torch.ones((2, 128), dtype=torch.bfloat16)
    idx = torch.tensor([[0, 1], [1, -1]], dtype=torch.int64)
    w = torch.tensor([[0.5, 0.25], [1.0, 0.0]], dtype=torch.float32)
    with caplog.at_level(logging.INFO, logger="mooncake.ep"):
        recv, count, handle, _, _ = buf.dispatch(x, idx, None, 4, 2, use_fp8=False)
        out, _, _ = buf.combine(recv, idx, w, None, -1, handle)
    assert buf.last_path == "host reference kernels" and not buf._use_fallback
    assert [r.getMessage() for r in caplog.records if "runs on" in r.getMessage()] == [
        f"mooncake.ep: Buffer.dispatch on rank 0 runs on host reference kernels ({host_lib})"
    ]
    assert count.tolist() == [1, 2]
    assert torch.equal(out.float(), torch.tensor([[0.75] * 128, [1.0] * 128]))
    with pytest.raises(ValueError, match="combine's topk_idx must be the topk_idx its dispatch was given"):
        buf.combine(recv, torch.tensor([[1, 0], [1, -1]]), w, None, -1, handle)


def test_gpu_check_script_runs_its_self_check(host_lib):
    """mooncake-ep/tests/gpu_check.py is the device check a lent GPU runs; given the host reference
    for both builds it runs its own comparison logic here, so it is known to work before then."""
    import subprocess
    import sys

    script = ROOT / "mooncake-ep/tests/gpu_check.py"
    env = {k: v for k, v in os.environ.items() if k != _kernels.ENV}
    res = subprocess.run([sys.executable, str(script), host_lib, host_lib, "--cases", "40"], capture_output=True,
                         text=True, timeout=240, env=env)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ABI: 40 random cases byte-equal between the builds" in res.stdout
    assert "Buffer: skipped (no CUDA library given)" in res.stdout
