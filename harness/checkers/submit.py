"""run.single_submit: one run, one reply, per run key.

A client that lost the acknowledgement of its submit sends the same RunInput again
(`submit_twice@run`, harness/trial/resubmit.py). The run key is the client's idempotency
key: the engine must answer the run it already has and create nothing, whether the
resubmit comes at once or after the run finished (CONTRACT.md, section 5). Judged from the
history alone: the run id each resubmit answered, the run ids the reports and the sink's
deliveries name, and what the world saw after a resubmit of a finished run (a second
model conversation, a second reply).
"""

from __future__ import annotations

from harness.checkers import verdict
from harness.trial import history as history_module
from harness.trial import resubmit
from harness.world import ledger

INVARIANT = "run.single_submit"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    first = history.run_id
    key = history.run_key
    resubmits = [fault for fault in history.faults() if fault.action == resubmit.ACTION]
    failures: list[str] = []
    notes: list[str] = []
    unknowns: list[str] = []
    if not resubmits:
        return verdict.decide(
            INVARIANT,
            failures=failures,
            notes=notes,
            passed="submitted once: nothing resubmitted in this trial",
        )
    if first is None:
        unknowns.append("the first submit answered no run id: nothing to compare with")
    others: set[str] = set()
    for fault in resubmits:
        if not fault.ok:
            notes.append(f"{fault.step} (seq {fault.seq}) did not strike: {fault.note}")
            continue
        answered = fault.observed.get(resubmit.RUN_ID)
        if first is not None and answered != first:
            others.add(str(answered))
            failures.append(
                f"a second run for run key {key}: {fault.step} (seq {fault.seq}) answered "
                f"run {answered}, the first submit created run {first}"
            )
        else:
            notes.append(f"{fault.step} (seq {fault.seq}) answered the first run {answered}")
        if fault.planned is not None and resubmit.when(fault.planned) == resubmit.AFTER_FINISH:
            failures.extend(_after_finish(history, fault))
    for report in history.reports:
        if first is not None and report.run_id != first:
            others.add(report.run_id)
            failures.append(f"a report of run {first} names run {report.run_id}")
            break
    replies = [
        entry
        for entry in history.sink
        if isinstance(entry, ledger.ReplyDelivery) and entry.run_id in others
    ]
    if replies:
        seqs = ", ".join(f"seq {entry.seq} run {entry.run_id}" for entry in replies)
        failures.append(
            f"{len(replies)} reply(ies) delivered by a second run of run key {key} ({seqs})"
        )
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=f"{len(resubmits)} resubmit(s) of run key {key} answered its one run {first}",
    )


def _after_finish(
    history: history_module.TrialHistory, fault: history_module.FaultApplied
) -> list[str]:
    """The run was terminal when the client submitted again: from then on the world must
    see nothing more of this run key, neither a model call nor a reply."""
    found: list[str] = []
    asked = [
        request
        for request in history.model
        if request.run_key == history.run_key and request.seq > fault.seq
    ]
    if asked:
        turns = sorted({request.turn for request in asked})
        found.append(
            f"the model was asked {len(asked)} time(s) for run key {history.run_key} after it "
            f"finished and was submitted again (seq {fault.seq}; turns {turns}): a second "
            "conversation"
        )
    replies = [
        entry
        for entry in history.sink
        if isinstance(entry, ledger.ReplyDelivery) and entry.seq > fault.seq
    ]
    if replies:
        found.append(
            f"{len(replies)} reply(ies) delivered after the finished run was submitted again "
            f"(seq {fault.seq}): " + ", ".join(f"seq {entry.seq}" for entry in replies)
        )
    return found
