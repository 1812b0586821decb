"""A fault that never struck proves nothing: the certificate shows INCONCLUSIVE for that
trial in every place it is shown (terminal table, Markdown, JSON) and grants nothing on it."""

from __future__ import annotations

import pathlib

import rich.console

from harness.campaigns import certify
from harness.checkers import judge, levels
from harness.checkers import verdict as verdict_module
from harness.faults import spec as fault_spec
from harness.record import history
from harness.trial import runner
from tests.checkers import builders

Verdict = verdict_module.Verdict
KILL = fault_spec.FaultStep(action="kill", point="tool.returned", occurrence=1)


def _outcome(trial: history.TrialHistory) -> runner.TrialOutcome:
    results, verdict = judge.judge(trial)
    spec = runner.TrialSpec(scenario=trial.scenario, plan=trial.plan, label="x")
    return runner.TrialOutcome(
        spec=spec,
        history=trial,
        results=results,
        verdict=verdict,
        directory=pathlib.Path("/nonexistent"),
        repro="crashcert run ...",
    )


def _certificate() -> certify.Certification:
    baseline = _outcome(builders.clean())
    # planned, never struck: the run went by without the kill ever happening
    unstruck = _outcome(builders.clean().model_copy(update={"plan": [KILL]}))
    assert unstruck.verdict is Verdict.INCONCLUSIVE  # plan.applied says so already
    assert all(r.verdict is Verdict.PASS for r in unstruck.results if r.invariant != "plan.applied")
    return certify.Certification(
        engine="e",
        engine_ref="e.yaml",
        modes=["boundary"],
        trials=[certify.CertTrial("boundary", baseline), certify.CertTrial("boundary", unstruck)],
    )


def test_unstruck_passes_count_as_not_shown() -> None:
    cert = _certificate()
    assert [t.outcome.spec.plan for t in cert.not_applied] == [[KILL]]
    assert cert.verdict_of("tool.at_most_once") is Verdict.INCONCLUSIVE
    assert cert.held == set()
    assert cert.level is levels.Level.NONE  # granted on a kill that never happened before


def test_every_rendering_says_inconclusive() -> None:
    cert = _certificate()
    as_json = certify.to_json(cert)
    assert as_json["invariants"]["reply.single_delivery"]["verdict"] == "INCONCLUSIVE"
    assert as_json["invariants"]["reply.single_delivery"]["by_fault_class"] == {
        "boundary:baseline": "P1",
        "boundary:kill@boundary": "I1",
    }
    markdown = certify.to_markdown(cert)
    assert "| reply.single_delivery | INCONCLUSIVE | P1 | I1 |" in markdown
    console = rich.console.Console(record=True, width=200)
    certify.print_certification(cert, console=console)
    table = console.export_text()
    assert "I1" in table and "INCONCLUSIVE" in table
