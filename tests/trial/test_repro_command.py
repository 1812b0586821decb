"""A trial's rerun line asks for what made the trial: its faults, its mode, its network."""

from __future__ import annotations

import shlex

import pytest

from harness.lab import isolation
from harness.scenario import schema
from harness.trial import runner


@pytest.fixture(autouse=True)
def _isolation_as_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's isolation as a fresh crashcert has it: nothing chosen yet."""
    monkeypatch.setattr(isolation, "_state", isolation.State(isolation.OFF, "not applied"))


def _spec() -> runner.TrialSpec:
    return runner.TrialSpec.under(
        schema.find("refund"), ["kill@tool.returned#1"], seed=7, scenario_ref="refund"
    )


def test_a_boundary_trial_reruns_with_its_faults_and_seed() -> None:
    argv = shlex.split(runner.repro_command(_spec()))
    assert argv[:2] == ["crashcert", "run"]
    assert "--black-box" not in argv and "--isolation" not in argv
    assert argv[argv.index("--fault") + 1] == "kill@tool.returned#1"
    assert argv[argv.index("--seed") + 1] == "7"


def test_a_black_box_trial_reruns_as_one() -> None:
    argv = shlex.split(runner.repro_command(_spec(), black_box=True))
    assert argv[:2] == ["crashcert", "run"] and "--black-box" in argv


def test_a_trial_run_with_the_network_off_on_purpose_reruns_with_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An engine that needs the outside network was run with --isolation off; its rerun
    line must not put it in a private network, where it would fail for another reason."""
    chosen_off = isolation.State(isolation.OFF, "network isolation off", chosen=isolation.OFF)
    monkeypatch.setattr(isolation, "_state", chosen_off)
    argv = shlex.split(runner.repro_command(_spec()))
    assert argv[:4] == ["crashcert", "--isolation", "off", "run"]


def test_isolation_off_for_a_reason_is_not_asked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off because of --pg-dsn (auto): the rerun decides again by the same rules."""
    off_by_rule = isolation.State(isolation.OFF, "network isolation off: --pg-dsn")
    monkeypatch.setattr(isolation, "_state", off_by_rule)
    assert "--isolation" not in shlex.split(runner.repro_command(_spec()))
