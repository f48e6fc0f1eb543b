"""mooncake.ep on 2, 3 and 4 real CPU ranks over gloo, checked against numpy: rows through the
group's all_to_all_single (the fallback, ``pg``) and through the Transfer Engine's registered
buffers over tcp (``te``; at 3 ranks with the buffers registered as fake GPU memory, ``te-fakedev``).

ep_workers.py runs every scenario once per world size and pass (one process per rank); these
tests read what each rank saved and recompute the expected routing and combine in numpy,
independently of the package's torch code, and require the ``te`` pass to equal the ``pg`` pass
byte for byte.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from ep_ranks import run_ranks

pytest.importorskip("torch")  # the dev extra pins it; without it the package's torch-free parts still run

HERE = Path(__file__).resolve().parent
HIDDEN = 128


_RUNS: dict = {}
# The world sizes (one process set each): 2 and 4 in the suite, MC_EP_WORLDS=2,3,4 for more.
WORLDS = [int(w) for w in os.environ.get("MC_EP_WORLDS", "2,4").split(",")]


def _world_run(tmp_path_factory, world, variant=""):
    """One process set per world size and variant, rows over tcp: on gloo (variant "") passes pg,
    te and, on 2 ranks, te-fakedev (regions as fake GPU memory); te on our mooncake-cpu PG
    ("mooncake-cpu")."""
    key = (world, variant)
    if key not in _RUNS:
        out = tmp_path_factory.mktemp(f"ep{world}{variant}")
        env = dict(os.environ, MC_EP_TE_PROTOCOL="tcp")
        if variant == "mooncake-cpu":
            env.update(EP_TEST_BACKEND="mooncake-cpu")
        passes = {"": "pg,te,te-fakedev" if world == 2 else "pg,te", "mooncake-cpu": "te-mooncake-cpu"}[variant]
        _RUNS[key] = (out, run_ranks(HERE / "ep_workers.py", world, out, [passes], env=env))
    return _RUNS[key]


_KINDS = {"pg": ("pg", ""), "te": ("te", ""), "te-fakedev": ("te-fakedev", ""),
          "te-mooncake-cpu": ("te-mooncake-cpu", "mooncake-cpu")}  # fmt: skip


@pytest.fixture(
    scope="module",
    params=[(w, k) for w in WORLDS for k in ("pg", "te")],
    ids=[f"{w}ranks-{k}" for w in WORLDS for k in ("pg", "te")],
)
def run(request, tmp_path_factory):
    world, kind = request.param
    sub, variant = _KINDS[kind]
    out, logs = _world_run(tmp_path_factory, world, variant)
    return world, out / sub, logs


@pytest.fixture(scope="module", params=[(w, "") for w in WORLDS] + [(2, "mooncake-cpu")],
                ids=[f"{w}ranks-gloo" for w in WORLDS] + ["2ranks-mooncake-cpu"])  # fmt: skip
def both(request, tmp_path_factory):
    """The group path on gloo, and the engine path of the same world on gloo or mooncake-cpu."""
    world, variant = request.param
    pg_out, _ = _world_run(tmp_path_factory, world)
    te_out, logs = _world_run(tmp_path_factory, world, variant)
    return world, pg_out / "pg", te_out / ("te-" + variant if variant else "te"), logs


def _load(run, name):
    world, out, logs = run
    errors = sorted(out.glob(f"{name}.*.error"))
    assert not errors, "\n".join(e.read_text() for e in errors) + "\n".join(logs)
    return [dict(np.load(out / f"{name}.{r}.npz")) for r in range(world)]


def _json(run, name):
    world, out, _ = run
    errors = sorted(out.glob(f"{name}.*.error"))
    assert not errors, "\n".join(e.read_text() for e in errors)
    return [json.loads((out / f"{name}.{r}.json").read_text()) for r in range(world)]


def bf16(a):
    """Round float32 to bfloat16 (nearest even), as torch does, returned as float32."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def factor(e):
    return 1.0 + np.asarray(e, dtype=np.float32) / 8.0


def expected_routing(ranks, world, num_experts, active):
    """Per destination rank and local expert, the (source, token) pairs in source, token order."""
    nl = num_experts // world
    route = {}
    for r in range(world):
        for le in range(nl):
            e = r * nl + le
            pairs = []
            if active[r]:
                for s in range(world):
                    if active[s]:
                        pairs += [(s, t) for t in range(ranks[s]["idx"].shape[0]) if e in ranks[s]["idx"][t]]
            route[r, le] = pairs
    return route


def expected_combined(ranks, world, num_experts, active, per_expert_bf16):
    """Sum over a token's selections of weight * expert(x); selections on inactive ranks drop out."""
    nl = num_experts // world
    out = []
    for s in range(world):
        x, idx, w = ranks[s]["x"], ranks[s]["idx"], ranks[s]["w"]
        acc = np.zeros_like(x, dtype=np.float64)
        if active[s]:
            for t in range(x.shape[0]):
                for j in range(idx.shape[1]):
                    e = idx[t, j]
                    if e < 0 or not active[e // nl]:
                        continue
                    y = bf16(x[t] * factor(e)) if per_expert_bf16 else x[t] * factor(e)
                    acc[t] += w[t, j] * y
        out.append(acc)
    return out


def check_buffer(run, name, active=None, exact_recv=True):
    world = run[0]
    ranks = _load(run, name)
    num_experts = 2 * world
    nl = 2
    active = active or [1] * world
    route = expected_routing(ranks, world, num_experts, active)
    for r in range(world):
        got = ranks[r]
        np.testing.assert_array_equal(got["active_after"], active)
        for le in range(nl):
            pairs = route[r, le]
            assert got["count"][le] == len(pairs), (r, le)
            assert list(got["src_info"][le, : len(pairs)]) == [t for _, t in pairs]
            for s in range(world):
                entry = int(got["layout"][le, s])
                mine = [i for i, (src, _) in enumerate(pairs) if src == s]
                assert (entry & 0xFFFFFFFF) == len(mine)
                if mine:
                    assert entry >> 32 == mine[0]
            want = np.array([ranks[s]["x"][t] for s, t in pairs]).reshape(len(pairs), HIDDEN)
            if exact_recv:
                np.testing.assert_array_equal(got["recv"][le, : len(pairs)], want)
            else:  # fp8 e4m3 keeps 3 mantissa bits, scaled per 128 columns
                np.testing.assert_allclose(got["recv"][le, : len(pairs)], want, rtol=0.07, atol=0.02 * np.abs(want).max(initial=1))
    want = expected_combined(ranks, world, num_experts, active, per_expert_bf16=True)
    for r in range(world):
        tol = 0.15 if not exact_recv else 1e-2
        np.testing.assert_allclose(ranks[r]["combined"], want[r], rtol=tol, atol=tol)
        if not active[r]:
            assert not ranks[r]["combined"].any()


def test_buffer_dispatch_combine_weighted_sum(run):
    check_buffer(run, "buffer")


def test_buffer_fp8_dispatch(run):
    check_buffer(run, "buffer_fp8", exact_recv=False)


def test_buffer_zero_copy_combine(run):
    check_buffer(run, "buffer_zero_copy")


def test_buffer_rank_marked_inactive_by_one_rank(run):
    world = run[0]
    check_buffer(run, "buffer_inactive", active=[1] * (world - 1) + [0])


def test_buffer_rank_without_tokens(run):
    check_buffer(run, "buffer_empty")


def check_elastic(run, name, active=None, expand=False):
    world = run[0]
    ranks = _load(run, name)
    num_experts, nl, max_tokens = 2 * world, 2, 8
    active = active or [1] * world
    for r in range(world):
        got = ranks[r]
        np.testing.assert_array_equal(got["active_after"], active)
        # Tokens arrive once per destination rank, by source then token (one scale-up rank on CPU).
        rows = []
        if active[r]:
            for s in range(world):
                if active[s]:
                    rows += [(s, t) for t in range(ranks[s]["idx"].shape[0]) if any(0 <= e and e // nl == r for e in ranks[s]["idx"][t])]
        assert int(got["actual"]) == len(rows)
        assert list(got["meta"][:, 0]) == [s * max_tokens + t for s, t in rows]
        per_expert = [sum(1 for s, t in rows if r * nl + le in ranks[s]["idx"][t]) for le in range(nl)]
        assert list(got["counts"]) == per_expert
        want_idx = np.array([[e - r * nl if e >= 0 and e // nl == r else -1 for e in ranks[s]["idx"][t]] for s, t in rows]).reshape(len(rows), 3)
        np.testing.assert_array_equal(got["ridx"], want_idx)
        if expand:
            ends, start = [], 0
            for c in per_expert:
                start = -(-start // 4) * 4 + c
                ends.append(start)
            assert list(got["psum_expert"][:nl]) == ends
            assert got["recv"].shape[0] == (ends[-1] if ends else 0)
        else:
            want_x = np.array([ranks[s]["x"][t] for s, t in rows]).reshape(len(rows), HIDDEN)
            np.testing.assert_array_equal(got["recv"], want_x)
            want_w = np.array([[ranks[s]["w"][t][j] if want_idx[i][j] >= 0 else 0 for j in range(3)] for i, (s, t) in enumerate(rows)]).reshape(len(rows), 3)
            np.testing.assert_array_equal(got["rw"], want_w)
    want = expected_combined(ranks, world, num_experts, active, per_expert_bf16=expand)
    for r in range(world):
        np.testing.assert_allclose(ranks[r]["combined"], want[r], rtol=2e-2, atol=2e-2)
        if not expand:  # identity experts on the cached handle: x2 once per active destination rank
            idx = ranks[r]["idx"]
            dests = [len({e // nl for e in row if e >= 0 and active[e // nl]}) if active[r] else 0 for row in idx]
            want2 = ranks[r]["x2"] * np.array(dests, dtype=np.float32).reshape(-1, 1)
            np.testing.assert_allclose(ranks[r]["cached"], want2, rtol=1e-2, atol=1e-2)


def test_elastic_dispatch_combine_weighted_sum(run):
    check_elastic(run, "elastic")


def test_elastic_expanded_layout(run):
    check_elastic(run, "elastic_expand", expand=True)


def test_elastic_rank_inactive(run):
    world = run[0]
    check_elastic(run, "elastic_inactive", active=[1] * (world - 1) + [0])


def test_shapes_at_size_hint_limits(run):
    world = run[0]
    ranks = _load(run, "limits")
    m = 8
    all_x = np.concatenate([ranks[s]["x"] for s in range(world)])
    # Expert 0 receives every token of every rank: the layout's full capacity.
    assert ranks[0]["count"][0] == world * m
    np.testing.assert_array_equal(ranks[0]["recv"][0], all_x)
    np.testing.assert_array_equal(ranks[0]["erecv"], all_x)
    for r in range(world):
        np.testing.assert_array_equal(ranks[r]["combined"], ranks[r]["x"])
        np.testing.assert_array_equal(ranks[r]["ecombined"], ranks[r]["x"])
    for res in _json(run, "limits"):
        assert res["buffer_one_byte_short"].startswith("ValueError") and "get_ep_buffer_size_hint" in res["buffer_one_byte_short"]
        assert res["tokens_over_max"].startswith("ValueError") and "more than" in res["tokens_over_max"]
        assert res["elastic_one_byte_short"].startswith("ValueError"), res


def test_bad_arguments_clear_errors(run):
    for res in _json(run, "bad_arguments"):
        bad = {k: v for k, v in res.items() if v.startswith(("WRONG", "NO ERROR"))}
        assert not bad, bad
        assert "bfloat16" in res["x_float32"]
        assert "[-1, " in res["expert_out_of_range"]
        assert "divisible" in res["experts_not_divisible"]
        assert "one entry per rank" in res["active_ranks_length"]
        assert "get_next_combine_buffer" in res["zero_copy_without_buffer"]
        assert "destroyed" in res["elastic_destroyed"]
        assert "mooncake.engine.TransferEngine, got str" in res["engine_not_an_engine"]
        assert "must be initialized" in res["engine_not_started"]


def test_ranks_disagreeing_on_shapes_all_fail_and_stay_in_step(run):
    world = run[0]
    results = _json(run, "mismatch")
    for res in results:
        assert res["num_experts"].startswith("ValueError: ranks disagree on num_experts"), res
    assert sum(res["after"] for res in results) == 4 * world
    assert sum(res["after_update"][0] for res in results) == 4 * world
    assert all(res["after_update"][1] is True for res in results), results


def test_workers_exit_cleanly(run):
    world, out, logs = run
    assert not list(out.glob("*.error")), [e.read_text() for e in out.glob("*.error")]


def test_rows_took_the_named_transport(run):
    world, out, _ = run
    want = "process group" if out.name == "pg" else "Transfer Engine (tcp)"
    for r in range(world):
        assert json.loads((out / f"transport.{r}.json").read_text()) == [want]


def test_te_rows_equal_the_fallback_byte_for_byte(both):
    """Every array every scenario saved (received rows, counts, layouts, combined tokens, errors'
    texts) is the same bytes whether rows went through the group or the Transfer Engine."""
    world, pg, te, logs = both
    names = sorted(p.name for p in te.glob("*.npz"))
    # every Buffer/ElasticBuffer scenario of every rank (on mooncake-cpu: the 6 of its pass)
    assert len(names) == (6 if te.name == "te-mooncake-cpu" else 9) * world, names
    _same_bytes(pg, te, names)
    for name in sorted(p.name for p in te.glob("*.json")):
        if not name.startswith(("transport.", "engine_missing.", "te_shm.")):  # te pass only
            a, b = json.loads((pg / name).read_text()), json.loads((te / name).read_text())
            if name.startswith("mismatch."):  # the same but for the transport's name
                assert a["after_update"][2] == "process group" and b["after_update"][2].startswith("Transfer Engine")
                a["after_update"], b["after_update"] = a["after_update"][:2], b["after_update"][:2]
            assert a == b, name


def _same_bytes(pg, te, names):
    for name in names:
        a, b = np.load(pg / name), np.load(te / name)
        assert sorted(a.files) == sorted(b.files), name
        for k in a.files:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (name, k)
            assert a[k].tobytes() == b[k].tobytes(), (name, k)


def test_rows_landing_in_fake_gpu_memory(tmp_path_factory):
    """2 ranks, the regions registered as fake GPU memory: every row crosses the engine's device
    staging; right against numpy and byte-equal to the group path."""
    world = 2
    out, logs = _world_run(tmp_path_factory, world)
    fake = (world, out / "te-fakedev", logs)
    for r in range(world):
        assert json.loads((out / "te-fakedev" / f"transport.{r}.json").read_text()) == ["Transfer Engine (tcp)"]
    check_buffer(fake, "buffer")
    check_buffer(fake, "buffer_inactive", active=[1, 0])
    check_elastic(fake, "elastic")
    check_elastic(fake, "elastic_expand", expand=True)
    test_shapes_at_size_hint_limits(fake)
    names = [f"{n}.{r}.npz" for n in ("buffer", "buffer_inactive", "elastic", "elastic_expand", "limits")
             for r in range(world)]  # fmt: skip
    _same_bytes(out / "pg", out / "te-fakedev", names)


@pytest.mark.parametrize("world", WORLDS)
def test_without_an_engine_on_one_rank_all_ranks_take_the_group(tmp_path_factory, world):
    out, _ = _world_run(tmp_path_factory, world)
    te = out / "te"
    for res in _json((world, te, None), "engine_missing"):
        assert res["auto_transport"] == "process group", res
        assert res["auto_roundtrip_exact"] is True
        assert res["te_forced"].startswith("RuntimeError: MC_EP_TRANSPORT=te but ranks [%d]" % (world - 1)), res
        assert res["given_transport"] == "Transfer Engine", res
        assert res["given_roundtrip_exact"] is True and res["given_engine_moved_bytes"] is True, res
        assert res["bad_mode"].startswith("ValueError: MC_EP_TRANSPORT must be one of"), res


def test_failed_device_copy_fails_that_call_and_the_group_goes_on(tmp_path_factory):
    world = 2
    out, logs = _world_run(tmp_path_factory, world)
    results = _json((world, out / "te-fakedev", logs), "te_copy_failure")
    assert results[0]["failed"].startswith("RuntimeError: mooncake.ep: writing rows through the Transfer Engine (tcp) "
                                           "failed to rank 1"), results[0]  # fmt: skip
    assert results[1]["failed"].startswith("RuntimeError: mooncake.ep: rows from ranks [0] did not land"), results[1]
    assert all(res["after_exact"] is True for res in results), results


def test_rows_through_the_engine_on_our_mooncake_cpu_group(tmp_path_factory):
    """On our mooncake-cpu PG (its own all_to_all_single cannot take a rank without rows): the
    group's own engine carries the rows, the group only the metadata; inactive and token-less
    ranks work."""
    world = 2
    out, logs = _world_run(tmp_path_factory, world, "mooncake-cpu")
    mc = (world, out / "te-mooncake-cpu", logs)
    for r in range(world):
        # the engine mooncake.pg.set_transfer_engine gave the group (its protocol is the caller's)
        assert json.loads((mc[1] / f"transport.{r}.json").read_text()) == ["Transfer Engine"]
        assert json.loads((out / f"pg_engine.{r}.json").read_text()) == {"same_engine": True, "name": "Transfer Engine"}
    check_buffer(mc, "buffer")
    check_buffer(mc, "buffer_empty")
    check_buffer(mc, "buffer_inactive", active=[1, 0])
    check_elastic(mc, "elastic")
    check_elastic(mc, "elastic_inactive", active=[1, 0])
    test_shapes_at_size_hint_limits(mc)


def test_a_rank_that_cannot_register_its_regions_fails_the_call_everywhere(tmp_path_factory):
    world = 2
    out, logs = _world_run(tmp_path_factory, world)
    results = _json((world, out / "te-fakedev", logs), "te_region_failure")
    for r, res in enumerate(results):
        assert res["failed"].startswith(f"RuntimeError: mooncake.ep: ranks [{world - 1}] could not register their "
                                        "Transfer Engine (tcp) regions"), res  # fmt: skip
        assert ("this rank:" in res["failed"]) == (r == world - 1), res
        assert res["after_exact"] is True, res


@pytest.mark.parametrize("world", WORLDS)
def test_rows_through_shm_with_the_automatic_protocol(tmp_path_factory, world):
    out, logs = _world_run(tmp_path_factory, world)
    for res in _json((world, out / "te", logs), "te_shm"):
        assert res["name"] == "Transfer Engine (auto)" and res["exact"] is True, res
        # 4 rows out in dispatch (2 * 128 + 16 bytes each), 4 back in combine (2 * 128), 2 flags
        assert res["shm_bytes"] == 4 * (2 * HIDDEN + 16) + 4 * 2 * HIDDEN + 2 * 8 and res["tcp_bytes"] == 0, res
