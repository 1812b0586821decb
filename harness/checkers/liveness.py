"""`run.liveness`: after the last fault heals, the run reaches its expected terminal status
within the scenario's deadline.
"""

from __future__ import annotations

from harness.checkers import facts, reach, verdict
from harness.record import history as history_module

INVARIANT = "run.liveness"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    if history.harness_error:
        return verdict.CheckResult(
            invariant=INVARIANT,
            verdict=verdict.Verdict.ERROR,
            summary="the harness broke; liveness cannot be judged",
            evidence=[f"harness_error: {history.harness_error}"],
        )
    report = history.final_report
    failures: list[str] = []
    notes: list[str] = []
    if report is None:
        failures.append("hung: the run never produced a report")
        return _decide(history, failures, notes, passed="")
    if not report.terminal:
        down = facts.database_down_at_end(history)
        state = f"last status {report.status}, frontier phase {report.frontier.phase} " + (
            f"v{report.frontier.version}"
        )
        if down:
            failures.append(
                f"waiting for the database: not terminal ({state}); never healed: "
                + "; ".join(item.describe() for item in down)
            )
        else:
            failures.append(f"hung: not terminal at the end ({state})")
        return _decide(history, failures, notes, passed="")
    # The clock starts when the workers do (not while the harness clones a database),
    # or, after faults, when the last one healed.
    if history.healed_at is not None:
        since, since_what = history.healed_at, "the last heal"
    elif history.workers_started_at is not None:
        since, since_what = history.workers_started_at, "the workers started"
    else:
        since, since_what = history.started_at, "the start"
    finished = history.finished_at
    if finished is None:
        finished = history.ended_at
        notes.append("finished_at missing: using ended_at, when the trial ended")
    elapsed = finished - since
    deadline = history.scenario.deadline_s
    line = f"terminal {elapsed:.3f}s after {since_what} (deadline {deadline:g}s)"
    (failures if elapsed > deadline else notes).append(line)
    accepted = reach.accepted_status(history, report)
    if accepted is not None:
        notes.append(accepted)
    else:
        reason = f" (reason {report.reason!r})" if report.reason else ""
        failures.append(
            f"status {report.status}{reason}, expected {history.scenario.expect.status}"
        )
    # The fact a PASS rests on: the status it accepts (accepted_status says why) and when.
    passed = (
        f"{accepted or report.status}; terminal {elapsed:.3f}s after {since_what}, within the "
        f"{deadline:g}s deadline"
    )
    return _decide(history, failures, notes, passed=passed)


def _decide(
    history: history_module.TrialHistory, failures: list[str], notes: list[str], *, passed: str
) -> verdict.CheckResult:
    """A worker that crashed on its own is named in the first failure, and every crash's
    log tail is evidence: the verdict points at what broke the run."""
    crash = reach.first_crash(history)
    if failures and crash:
        failures[0] += f"; {crash}"
    elif crash:  # recovered from, yet an engine bug a stranger should see
        passed += f"; recovered from a crash: {crash}"
    return verdict.decide(
        INVARIANT, failures=failures, notes=[*reach.crash_evidence(history), *notes], passed=passed
    )
