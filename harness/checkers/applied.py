"""What the harness itself did was applied: every planned fault struck, every scenario action
fired. A trial where either is missing proved nothing (INCONCLUSIVE), whatever the engine did.
"""

from __future__ import annotations

from harness.checkers import verdict
from harness.contract import boundaries
from harness.record import history

PLAN = "plan.applied"
ACTIONS = "scenario.actions"


def plan_result(trial: history.TrialHistory) -> verdict.CheckResult:
    """Every planned fault must have struck, or the trial proves nothing: INCONCLUSIVE.
    A time kill that struck once the run was terminal tested nothing either."""
    late = after_terminal(trial)
    applied = [fault.planned for fault in trial.faults() if fault.ok and fault not in late]
    missing = [step.label() for step in trial.plan if step not in applied]
    failed = [f"{fault.step}: {fault.note}" for fault in trial.faults() if not fault.ok]
    failed += [
        f"{fault.step}: struck {fault.t - (trial.finished_at or 0.0):.3f}s after the run was "
        "seen terminal: not applied"
        for fault in late
    ]
    if not missing:
        return verdict.CheckResult(
            invariant=PLAN,
            verdict=verdict.Verdict.PASS,
            summary=f"{len(trial.plan)} planned fault(s) applied",
        )
    return verdict.CheckResult(
        invariant=PLAN,
        verdict=verdict.Verdict.INCONCLUSIVE,
        summary=f"planned fault(s) never applied: {', '.join(missing)}",
        evidence=[*failed, "the boundary was never reached or the fault could not be applied"],
    )


def after_terminal(trial: history.TrialHistory) -> list[history.FaultApplied]:
    """Time kills that struck at or after the moment the run was first seen terminal."""
    if trial.finished_at is None:
        return []
    return [
        fault
        for fault in trial.faults()
        if fault.ok
        and fault.planned is not None
        and boundaries.time_point_seconds(fault.planned.point) is not None
        and fault.t >= trial.finished_at
    ]


def actions_result(trial: history.TrialHistory) -> verdict.CheckResult:
    """Every scenario action applied, or the trial proves nothing: INCONCLUSIVE."""
    wanted = trial.scenario.actions
    done = [taken for taken in trial.actions() if taken.ok]
    failed = [
        f"{taken.do} {taken.call or ''} at {taken.at}: {taken.note}"
        for taken in trial.actions()
        if not taken.ok
    ]
    if len(done) == len(wanted):
        return verdict.CheckResult(
            invariant=ACTIONS,
            verdict=verdict.Verdict.PASS,
            summary=f"{len(wanted)} scenario action(s) applied",
        )
    return verdict.CheckResult(
        invariant=ACTIONS,
        verdict=verdict.Verdict.INCONCLUSIVE,
        summary=f"{len(wanted) - len(done)} of {len(wanted)} scenario action(s) never applied",
        evidence=failed or ["the run ended before the action's point"],
    )
