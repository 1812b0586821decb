"""The one judge of a trial: every path that gives a verdict calls it (the runner live,
`analyze` and `merge` on stored trials, certify through the runner), so a trial read again
is judged exactly as it was when it ran.
"""

from __future__ import annotations

from harness import checkers
from harness.checkers import applied, blackbox, failover, verdict
from harness.record import history


def judge(
    trial: history.TrialHistory,
) -> tuple[list[verdict.CheckResult], verdict.Verdict]:
    """Every invariant (black-box aware), plan.applied and, when the scenario has actions,
    scenario.actions; and the trial's verdict."""
    results = blackbox.judge(trial)  # check_all, with world hits read as boundaries
    # An asynchronous failover's lost commits: judged on what the engine could know.
    results = failover.excuse(trial, results)
    results.append(applied.plan_result(trial))
    if trial.scenario.actions:
        results.append(applied.actions_result(trial))
    return results, checkers.trial_verdict(trial, results)
