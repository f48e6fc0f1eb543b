"""mooncake.pg under torch.distributed: real ranks in forked processes on loopback.

One three-rank group runs every phase (a process start costs more than the phases): each
collective against a reference each rank computes (dtypes x ops), DDP training equal to gloo's
on a two-rank subgroup, then a rank killed mid-training. MC_PG_SLOT_BYTES=8192 makes every
operation run several rounds. MC_PG_TEST_RANKS=N (nightly) also runs the collectives on N ranks."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

import pg_workers  # noqa: E402
from pg_harness import spawn as _spawn  # noqa: E402

from mooncake import pg  # noqa: E402



@pytest.fixture(scope="module")
def phases():
    """{rank: {phase: (value, seconds)}} of the two surviving ranks of one three-rank run."""
    return _spawn(pg_workers.all_phases, 3, dead=2)


def test_collectives_against_reference(phases):
    for r in (0, 1):
        checked, _ = phases[r]["collectives"]
        assert checked > 100  # every dtype x op, and the other collectives per dtype


def test_ddp_on_mooncake_matches_gloo(phases):
    assert phases[0]["ddp"][0] == phases[1]["ddp"][0] is not None


def test_dead_rank_detected_and_survivors_continue(phases):
    for r in (0, 1):
        took, _ = phases[r]["dead_rank"]
        # detected within the configured timeout (plus slack for a busy 2-core host), not hung
        assert took < pg_workers.DEAD_TIMEOUT_US / 1e6 + 15, took


@pytest.mark.skipif("MC_PG_TEST_RANKS" not in os.environ, reason="nightly: MC_PG_TEST_RANKS=N")
def test_collectives_on_more_ranks():
    n = int(os.environ["MC_PG_TEST_RANKS"])
    res = _spawn(pg_workers.collectives_only, n)
    assert set(res) == set(range(n))


def test_options_and_setters_reject_bad_arguments():
    assert pg.MooncakeBackendOptions(4).max_group_size == 4
    o = pg.MooncakeBackendOptions(8, False, False, True)
    assert (o.auto_deactivate_on_failure, o.auto_sync_on_failure) == (False, True)
    assert pg.MooncakeBackendOptions(torch.tensor([1, 1, 0])).max_group_size == 3
    with pytest.raises(ValueError, match="max_group_size"):
        pg.MooncakeBackendOptions(0)
    with pytest.raises(ValueError, match="max_group_size"):
        pg.MooncakeBackendOptions(65)
    with pytest.raises(TypeError):
        pg.MooncakeBackendOptions("4")
    with pytest.raises(TypeError):
        pg.set_collective_timeout_us(1.5)
    with pytest.raises(ValueError):
        pg.set_p2p_timeout_us(0)
    with pytest.raises(ValueError):
        pg.set_host_ip("")
    with pytest.raises(TypeError):
        pg.set_device_filter("mlx5_0")
    with pytest.raises(TypeError, match="mooncake-cpu"):
        pg.get_active_ranks(object())
    with pytest.raises(TypeError, match="mooncake-cpu"):
        pg.recover_ranks(object(), [1])
    assert pg.SyncAfterFailureStatus.Reconciled == 0 and pg.ProposalStatus.Applied == 1
    assert "MOONCAKE-CPU" in torch.distributed.Backend._plugins
