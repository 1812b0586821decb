"""A certification names a submit_twice trial by the run it strikes, not by a boundary."""

from __future__ import annotations

import pathlib

from harness.campaigns import certify
from harness.checkers import judge
from harness.faults import spec as fault_spec
from harness.trial import runner
from tests.checkers import builders


def test_a_resubmit_is_its_own_class_at_run() -> None:
    step = fault_spec.parse("submit_twice@run?when=after_finish")
    trial = builders.clean().model_copy(update={"plan": [step]})
    results, verdict = judge.judge(trial)
    outcome = runner.TrialOutcome(
        spec=runner.TrialSpec(scenario=trial.scenario, plan=trial.plan, label="x"),
        history=trial,
        results=results,
        verdict=verdict,
        directory=pathlib.Path("/nonexistent"),
        repro="crashcert run ...",
    )
    cert = certify.Certification(
        engine="e", engine_ref="e.yaml", modes=["boundary"],
        trials=[certify.CertTrial("boundary", outcome)],
    )  # fmt: skip
    assert cert.fault_classes == ["boundary:submit_twice@run"]
