"""The matrix table: a row per boundary, and rows for black-box points when trials used them."""

from __future__ import annotations

import io
import pathlib

import rich.console

from harness.checkers import verdict
from harness.faults import spec as fault_spec
from harness.planning import plan
from harness.record import history
from harness.report import summary
from harness.scenario import schema as scenario
from harness.trial import runner

REFUND = scenario.find("refund")


def outcome(fault: str | None, result: verdict.Verdict) -> runner.TrialOutcome:
    steps = [fault_spec.parse(fault)] if fault else []
    spec = runner.TrialSpec(scenario=REFUND, plan=steps, label=plan.plan_label(steps) or "baseline")
    return runner.TrialOutcome(
        spec=spec,
        history=history.TrialHistory(trial_id="t", engine="e", scenario=REFUND, run_key="k"),
        results=[],
        verdict=result,
        directory=pathlib.Path("/tmp/t"),
        repro="crashcert run ...",
    )


def table(outcomes: list[runner.TrialOutcome]) -> list[str]:
    console = rich.console.Console(
        file=io.StringIO(), width=200, force_terminal=True, color_system=None
    )
    summary.print_summary(outcomes, console=console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def row(lines: list[str], name: str) -> str:
    return next(line for line in lines if line.strip("│ ").startswith(name + " "))


def test_black_box_points_get_their_own_rows() -> None:
    lines = table(
        [
            outcome(None, verdict.Verdict.PASS),
            outcome("kill@world:tool.effect#1", verdict.Verdict.FAIL),
            outcome("kill@time:+0.3s", verdict.Verdict.PASS),
            outcome("kill@time:+1.2s", verdict.Verdict.PASS),
            outcome("kill@tools.pending#1", verdict.Verdict.PASS),
        ]
    )
    assert "F" in row(lines, "world:tool.effect")
    assert "P2" in row(lines, "time:+Ns")  # two PASS trials drawn at different moments
    assert "P" in row(lines, "tools.pending")
