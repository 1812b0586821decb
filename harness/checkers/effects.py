"""`tool.at_least_once`: a run that ends claiming its work done did the work the script needed.

The twin of `tool.at_most_once`. The scripted model answers its script whatever the tool
messages say, so a run can reach its final reply over a call that never reached the world
(an engine that gave up on a refused connection and told the model "error"). The world's
effect ledger is the truth: a run that ends `succeeded` (or `delivery_uncertain`, whose work
is done and only its reply unconfirmed) needs one effect per scripted call in it, since a
call refused while a link was cut was not applied and must be sent again once it heals.

A call is excused when its absence is the truth told: the engine ended it
`outcome_unknown` (report state, or the model was told so), the operator rejected it (report
state `rejected` or `cancelled`, or the scenario's `reject` action), or the world refused it
for good (a 4xx answer: `rejected` in the request ledger). Any other ending status is not a
claim of success: whether it was the right one is `run.liveness`'s question.
"""

from __future__ import annotations

import collections
import math

from harness.checkers import facts, reach, verdict
from harness.record import history as history_module

INVARIANT = "tool.at_least_once"
# Statuses that say the run's work is done.
DONE = frozenset({"succeeded", reach.UNCERTAIN})
# Report states that say the call did not (or may not) happen, truthfully.
EXCUSED_STATES = frozenset({"outcome_unknown", "rejected", "cancelled"})
# The world refused the request for good (bad arguments, unknown tool): nothing to retry.
REFUSED_BY_WORLD = "rejected"


def _excuses(history: history_module.TrialHistory) -> dict[str, str]:
    """call id -> why its absence from the world is no lie."""
    why: dict[str, str] = {}
    report = history.final_report
    for reported in report.tool_calls if report else []:
        if reported.state in EXCUSED_STATES:
            why.setdefault(reported.id, f"the engine reports it {reported.state}")
    for request in facts.model_requests(history):
        for message in facts.tool_messages(request):
            if message.content is not None and message.content.get("status") == "outcome_unknown":
                why.setdefault(
                    message.call_id, f"the model was told outcome_unknown (seq {request.seq})"
                )
    for action in history.scenario.actions:
        if action.do == "reject" and action.call is not None:
            why.setdefault(action.call, "the scenario rejects it")
    refused = {
        facts.logical_call(request.tool, request.arguments)
        for request in facts.tool_requests(history)
        if request.outcome == REFUSED_BY_WORLD
    }
    for call in facts.scripted_calls(history).values():
        if call.call in refused:
            why.setdefault(call.id, "the world refused it for good (4xx)")
    return why


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    report = history.final_report
    scripted = facts.scripted_calls(history)
    failures: list[str] = []
    notes: list[str] = []
    if report is None or not report.terminal:
        why = reach.cut_short(history) or "the run never finished"
        return verdict.decide(
            INVARIANT, failures=[], notes=[], unknowns=[f"nothing to judge: {why}"], passed=""
        )
    if report.status not in DONE:
        what = f"the run ended {report.status}, no claim that its work was done"
        if unproven := reach.nothing_to_judge(INVARIANT, what, history, notes):
            return unproven
        return verdict.decide(INVARIANT, failures=[], notes=[what], passed=what)
    effects = collections.Counter(
        facts.logical_call(effect.tool, effect.arguments) for effect in facts.tool_effects(history)
    )
    excuses = _excuses(history)
    needed: dict[facts.LogicalCall, list[str]] = collections.defaultdict(list)
    for call in scripted.values():
        if call.id in excuses:
            notes.append(f"call {call.id!r} {call.call}: not required, {excuses[call.id]}")
        else:
            needed[call.call].append(call.id)
    done = 0
    for logical, ids in needed.items():
        seen = effects[logical]
        if seen < len(ids):
            names = ", ".join(repr(call_id) for call_id in ids)
            failures.append(
                f"run {report.status}, but {logical} (call {names}) has {seen} effect(s) in the "
                f"world, {len(ids)} needed: the work the script needed never happened"
            )
        else:
            done += len(ids)
    unhealed = [item for item in facts.interruptions(history) if math.isinf(item.end)]
    if failures and unhealed:
        return verdict.decide(
            INVARIANT,
            failures=[],
            notes=[*failures, *notes],
            unknowns=[
                "a fault never healed, so a missing effect may be its doing: "
                + "; ".join(item.describe() for item in unhealed)
            ],
            passed="",
        )
    if failures and report.tool_calls:
        states = ", ".join(f"{call.id} {call.state}" for call in report.tool_calls)
        notes.append(f"the report's tool calls: {states}")
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        passed=(
            f"run {report.status}; {done} scripted call(s) each have their effect in the "
            f"world, {len(scripted) - done} excused"
        ),
    )
