"""`run.liveness`: after the last fault heals, the run reaches its expected terminal status
within the scenario's deadline.
"""

from __future__ import annotations

from harness import boundaries
from harness import history as history_module
from harness.checkers import facts, verdict

INVARIANT = "run.liveness"
UNCERTAIN = "delivery_uncertain"


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
        return verdict.decide(INVARIANT, failures=failures, notes=notes, passed="")
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
        return verdict.decide(INVARIANT, failures=failures, notes=notes, passed="")
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
    expected = history.scenario.expect.status
    struck = facts.struck_in(history, boundaries.DELIVERY_WINDOW)
    if report.status == expected:
        notes.append(f"status {report.status} as expected")
    elif report.status == UNCERTAIN and struck and not history.scenario.sink.queryable:
        notes.append(
            f"status {UNCERTAIN} instead of {expected}: a fault struck in the delivery window "
            f"({struck[0].describe()}) and the sink cannot be queried"
        )
    else:
        reason = f" (reason {report.reason!r})" if report.reason else ""
        failures.append(f"status {report.status}{reason}, expected {expected}")
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        passed=f"{report.status} {elapsed:.3f}s after {since_what}",
    )
