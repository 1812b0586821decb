"""`reply.single_delivery`: the final reply reached the sink at most once.

Exactly once when the sink can be queried by key; otherwise once, or the run ends
`delivery_uncertain` (with at most one delivery). The sink does not deduplicate, so its
delivery ledger is the truth. A sink that cannot be queried is never sent the reply again
after a fault struck inside the delivery window: whether the first POST left or not, the
recovering worker cannot know, so a POST of its own is a blind resend whatever the count.
"""

from __future__ import annotations

from harness.checkers import facts, reach, verdict
from harness.contract import boundaries
from harness.record import history as history_module
from harness.world import ledger

INVARIANT = "reply.single_delivery"
UNCERTAIN = "delivery_uncertain"
# Stopped until its resume: the interrupted worker's own POST can only come afterwards.
FROZEN = "pause"


def _blind_resends(history: history_module.TrialHistory, failures: list[str]) -> list[str]:
    """POSTs of the reply after a fault in the delivery window, on a sink that cannot be
    asked. The interrupted worker, if it survived and had not posted yet, may still send
    its own first POST: one is left to it. Returns notes."""
    notes: list[str] = []
    posts = facts.reply_requests(history)
    judged: set[int] = set()
    for item in facts.struck_in(history, boundaries.DELIVERY_WINDOW):
        after = [post for post in posts if post.t > item.start and post.seq not in judged]
        if item.fault.action != "kill" and not any(post.t < item.start for post in posts):
            since = item.end if item.fault.action == FROZEN else item.start
            own = next((post for post in after if post.t > since), None)
            if own is not None:
                after.remove(own)
                judged.add(own.seq)
                notes.append(
                    f"reply POST seq {own.seq} after {item.describe()} may be the interrupted "
                    "worker's own first send"
                )
        for post in after:
            judged.add(post.seq)
            failures.append(
                f"reply POST seq {post.seq} (key {post.key!r}) after {item.describe()} struck "
                "inside the delivery window: the sink cannot be asked, so a recovering worker "
                f"must end the run {UNCERTAIN}, never resend blindly"
            )
    return notes


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
    notes.extend(facts.foreign_notes(history, "sink"))
    for item in facts.struck_in(history, boundaries.DELIVERY_WINDOW):
        survived = " (the worker survived: its send may still be in flight)"
        notes.append(
            f"fault in the delivery window: {item.describe()}"
            + (survived if item.fault.action != "kill" else "")
        )
    if count > 1:
        failures.append(f"the reply was delivered {count} times (expected at most 1): {seqs}")
    if not queryable:
        notes.extend(_blind_resends(history, failures))
    if status is None:
        unknowns.append("no run report: cannot tell whether the delivery count is the right one")
    elif status == "succeeded" and count == 0:
        failures.append("the run says succeeded but the sink has no delivery of its reply")
    elif status == UNCERTAIN and queryable:
        failures.append(
            f"the run ended {UNCERTAIN} although the sink can be asked by key ({count} deliveries)"
        )
    # A run that ended uncertain, or posted its reply, got to the delivery: judged above.
    reached = status == UNCERTAIN or facts.reply_requests(history)
    if not reached and not failures and not unknowns:
        nothing = "the reply was never posted to the sink"
        if unproven := reach.nothing_to_judge(INVARIANT, nothing, history, notes):
            return unproven
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=_passed(delivered, status, sink),
    )


def _passed(delivered: list[ledger.ReplyDelivery], status: str | None, sink: str) -> str:
    """The fact a PASS rests on: the one delivery (its key and seq), or none, and how the
    run ended."""
    once = delivered[0] if delivered else None
    head = f"delivered once, key {once.key!r}, seq {once.seq}" if once else "never delivered"
    if status == UNCERTAIN:
        return f"{head}; the run ended {UNCERTAIN}, the sink cannot be asked: no resend"
    return f"{head}; sink {sink}, status {status}"
