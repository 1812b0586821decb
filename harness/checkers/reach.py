"""How far the run got, and why it stopped short: what a PASS with nothing to judge needs.

A checker whose invariant had nothing to judge (no tool reached the world, no reply was
posted, no lease changed hands) may PASS only when the run ended as the scenario expects:
then there was nothing to do. When the run stopped short (no report, not terminal, or a
status the scenario does not expect), the same emptiness proves nothing, so the answer is
INCONCLUSIVE with the reason, and a worker that crashed on its own is named with its log.
"""

from __future__ import annotations

from harness.checkers import facts, handovers, verdict
from harness.contract import boundaries, run_report
from harness.record import history as history_module

CRASHED = "crashed"
UNCERTAIN = "delivery_uncertain"
EXHAUSTED = "budget_exhausted"
# A worker that crashes at start-up crashes again in every replacement: the first few
# crashes with their log tails say it all.
CRASHES_SHOWN = 3


def crashes(history: history_module.TrialHistory) -> list[history_module.WorkerEvent]:
    """Workers that died on their own (the harness records them when it replaces them)."""
    return [
        event
        for event in history.events
        if isinstance(event, history_module.WorkerEvent) and event.event == CRASHED
    ]


def describe_crash(event: history_module.WorkerEvent) -> str:
    log = event.log or "its log"
    last = f", last line {event.log_tail[-1]!r}" if event.log_tail else ""
    return (
        f"worker {event.worker_id} (pid {event.pid}) crashed on its own with exit status "
        f"{event.returncode} (t={event.t:.3f}): see {log}{last}"
    )


def crash_evidence(history: history_module.TrialHistory) -> list[str]:
    """Each crash, then the tail of its log, one evidence line per log line."""
    lines: list[str] = []
    found = crashes(history)
    for event in found[:CRASHES_SHOWN]:
        lines.append(describe_crash(event))
        lines.extend(f"  {event.log or event.worker_id}: {line}" for line in event.log_tail)
    if len(found) > CRASHES_SHOWN:
        lines.append(f"{len(found) - CRASHES_SHOWN} more worker crashes (see workers/*.log)")
    return lines


def first_crash(history: history_module.TrialHistory) -> str | None:
    """The first crash, and how many followed, for a one-line summary."""
    found = crashes(history)
    if not found:
        return None
    more = f" (and {len(found) - 1} more crashes)" if len(found) > 1 else ""
    return describe_crash(found[0]) + more


def accepted_status(
    history: history_module.TrialHistory, report: run_report.RunReport
) -> str | None:
    """Why the terminal status is acceptable, or None: the scenario's expected status;
    `delivery_uncertain` after a fault, or a lease handover, in the delivery window on a
    sink that cannot be asked; `budget_exhausted` when handovers no fault planned (load
    stalling a live worker past its lease) made the engine spend the budget (handovers.py)."""
    expected = history.scenario.expect.status
    if report.status == expected:
        return f"status {report.status} as expected"
    if report.status == UNCERTAIN and not history.scenario.sink.queryable:
        struck = facts.struck_in(history, boundaries.DELIVERY_WINDOW)
        if struck:
            return (
                f"status {UNCERTAIN} instead of {expected}: a fault struck in the delivery "
                f"window ({struck[0].describe()}) and the sink cannot be queried"
            )
        handed = handovers.in_delivery_window(history)
        if handed:
            return (
                f"status {UNCERTAIN} instead of {expected}: {handed[0].describe()}, inside "
                "the delivery window, and the sink cannot be queried"
            )
    if report.status == EXHAUSTED:
        spent = handovers.budget_spent_on_unplanned(history)
        if spent is not None:
            return f"status {EXHAUSTED} instead of {expected}: {spent}"
    return None


def cut_short(history: history_module.TrialHistory) -> str | None:
    """Why the run did not get where the script goes, or None when it ended as expected."""
    report = history.final_report
    if report is None:
        why = "the run never produced a report"
    elif not report.terminal:
        why = f"the run never finished (last status {report.status})"
    elif accepted_status(history, report) is None:
        why = f"the run ended {report.status}, not {history.scenario.expect.status}"
    else:
        return None
    crash = first_crash(history)
    return f"{why}; {crash}" if crash else why


def nothing_to_judge(
    invariant: str, what: str, history: history_module.TrialHistory, notes: list[str]
) -> verdict.CheckResult | None:
    """INCONCLUSIVE when `what` (nothing happened to judge) is because the run stopped short;
    None when the run ended as expected, so the empty case is a real PASS."""
    why = cut_short(history)
    if why is None:
        return None
    summary = f"nothing to judge: {what}, because {why}"
    return verdict.CheckResult(
        invariant=invariant,
        verdict=verdict.Verdict.INCONCLUSIVE,
        summary=summary,
        evidence=[summary, *crash_evidence(history), *notes],
    )
