"""Soak: runs under a seeded storm of kills, pauses, cuts and Postgres restarts."""

from __future__ import annotations

import pytest

from harness.campaigns import soak
from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema

pytestmark = [pytest.mark.matrix, pytest.mark.postgres, pytest.mark.toxiproxy]


def _soak(tmp_path, **kwargs):
    with shared.open_lab(commands.find("reference")) as lab:
        return soak.run_soak(lab, schema.find("refund"), out_dir=tmp_path, **kwargs)


def test_small_soak_survives_the_storm(tmp_path):
    result = _soak(tmp_path, runs=20, workers=3, seed=7, storm_s=10, pg_restarts=2)
    print(result.summary())
    assert result.faults["pg_restart"] == 2
    assert sum(result.faults.values()) >= 5
    assert result.stuck == [], result.summary()
    assert result.failures == [], result.summary()
    assert result.statuses == {"succeeded": 20}
    assert result.verdict is verdict.Verdict.PASS


@pytest.mark.slow
def test_soak_500_runs_over_4_workers(tmp_path):
    result = _soak(tmp_path, runs=500, workers=4, seed=1, storm_s=180, pg_restarts=3)
    print(result.summary())
    assert result.stuck == [] and result.failures == [], result.summary()
