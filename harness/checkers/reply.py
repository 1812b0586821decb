"""`reply.single_delivery`: the final reply reached the sink at most once.

Exactly once when the sink can be queried by key; otherwise once, or the run ends
`delivery_uncertain` (with at most one delivery). The sink does not deduplicate, so its
delivery ledger is the truth.
"""

from __future__ import annotations

from harness import boundaries
from harness import history as history_module
from harness.checkers import facts, verdict

INVARIANT = "reply.single_delivery"
UNCERTAIN = "delivery_uncertain"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    delivered = facts.deliveries(history)
    count = len(delivered)
    seqs = ", ".join(f"seq {entry.seq} key {entry.key!r}" for entry in delivered) or "none"
    status = facts.final_status(history)
    queryable = history.scenario.sink.queryable
    sink = "queryable" if queryable else "not queryable"
    failures: list[str] = []
    unknowns: list[str] = []
    notes = [f"{count} deliveries of this run's reply ({seqs}); sink {sink}; status {status}"]
    for item in facts.struck_in(history, boundaries.DELIVERY_WINDOW):
        survived = " (the worker survived: its send may still be in flight)"
        notes.append(
            f"fault in the delivery window: {item.describe()}"
            + (survived if item.fault.action != "kill" else "")
        )
    if count > 1:
        failures.append(f"the reply was delivered {count} times (expected at most 1): {seqs}")
    if status is None:
        unknowns.append("no run report: cannot tell whether the delivery count is the right one")
    elif status == "succeeded" and count == 0:
        failures.append("the run says succeeded but the sink has no delivery of its reply")
    elif status == UNCERTAIN and queryable:
        failures.append(
            f"the run ended {UNCERTAIN} although the sink can be asked by key ({count} deliveries)"
        )
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=f"{count} delivery, status {status}, sink {sink}",
    )
