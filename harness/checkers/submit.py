"""run.single_submit: one run, one reply, per run key.

A client that lost the acknowledgement of its submit sends the same RunInput again
(`submit_twice@run`, harness/record/resubmit.py). The run key is the client's idempotency
key: the engine must answer the run it already has and create nothing, whether the
resubmit comes at once or after the run finished (CONTRACT.md, section 5). Judged from the
history alone: the run id each resubmit answered, the run ids the reports and the sink's
deliveries name, and what the world saw after a resubmit of a finished run (a second
model conversation, a second reply).

A purge ends a key's run: a request submitted under the key after the engine purged its
run (scenario actions `purge`, `reuse_key`; harness/trial/retention.py) is a new one. It
must get a run of its own, and its reply must answer its own model conversation, never
replay the purged run's (dbos-transact-py #769: step outputs a purge left behind were
replayed to a workflow that reused the id). The world knows the new request by its own
key, so its conversation and its reply are told apart from the purged run's.
"""

from __future__ import annotations

import math

from harness.checkers import verdict
from harness.record import history as history_module
from harness.record import resubmit
from harness.world import ledger

INVARIANT = "run.single_submit"
REUSE_KEY = "reuse_key"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    first = history.run_id
    key = history.run_key
    resubmits = [fault for fault in history.faults() if fault.action == resubmit.ACTION]
    reused = [taken for taken in history.actions() if taken.do == REUSE_KEY and taken.ok]
    failures: list[str] = []
    notes: list[str] = []
    unknowns: list[str] = []
    for taken in reused:
        _judge_reuse(history, taken, failures, notes, unknowns)
    if not resubmits and reused:
        return verdict.decide(
            INVARIANT,
            failures=failures,
            notes=notes,
            unknowns=unknowns,
            passed=f"the request reusing purged run key {key} got a run and a reply of its own",
        )
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
    # A purge ends the key's run: what a new request under the key brings is judged apart.
    end = min((t.requested_seq for t in history.actions() if t.do == "purge"), default=math.inf)
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
        if isinstance(entry, ledger.ReplyDelivery) and fault.seq < entry.seq < end
    ]
    if replies:
        found.append(
            f"{len(replies)} reply(ies) delivered after the finished run was submitted again "
            f"(seq {fault.seq}): " + ", ".join(f"seq {entry.seq}" for entry in replies)
        )
    return found


def _judge_reuse(
    history: history_module.TrialHistory,
    taken: history_module.ActionTaken,
    failures: list[str],
    notes: list[str],
    unknowns: list[str],
) -> None:
    """A new request under a purged run's key: a run of its own, its own answer."""
    key, world_key, since = history.run_key, taken.world_key, taken.requested_seq
    if taken.run_id == history.run_id:
        failures.append(
            f"a new request under purged run key {key} (seq {since}) was answered by the "
            f"purged run {taken.run_id}"
        )
    asked = [r for r in history.model if r.run_key == world_key and r.status_code == 200]
    answers = {r.response.get("content") for r in asked if r.response and r.response.get("content")}
    delivered = [e for e in history.sink if isinstance(e, ledger.ReplyDelivery)]
    before = {e.content: e.seq for e in delivered if e.seq < since}
    after = [e for e in delivered if e.seq > since]
    notes.append(
        f"new request under run key {key} (world key {world_key}, seq {since}) answered run "
        f"{taken.run_id}; the model was asked {len(asked)} time(s) for it; "
        f"{len(after)} reply(ies) since"
    )
    for entry in after:
        if entry.content in answers:
            continue
        old = before.get(entry.content)
        replayed = f": the purged run's reply (seq {old})" if old is not None else ""
        failures.append(
            f"replayed an old result: the reply to the new request under run key {key} "
            f"(seq {entry.seq}, run {entry.run_id}) is no answer the model gave that request "
            f"({len(asked)} model call(s) for world key {world_key}){replayed}"
        )
    if not after:
        unknowns.append(f"the new request under run key {key} got no reply before the end")
