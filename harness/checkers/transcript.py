"""`transcript.intact`: the model saw every tool result once, none lost, none invented,
and the reply delivered is the scripted one.

The model's own per-request transcript check (`problems`) is trusted; on top of it, the
last request must carry every earlier scripted call answered once, and an `ok` tool
message must carry what the world answered for that call.
"""

from __future__ import annotations

import collections

from harness.checkers import facts, reach, verdict
from harness.record import history as history_module
from harness.world import ledger

INVARIANT = "transcript.intact"
ANSWERED_OUTCOMES = frozenset({"ok", "deduplicated"})


def _world_answers(history: history_module.TrialHistory) -> dict[facts.LogicalCall, set[str]]:
    """Results the world gave per logical call: answered requests, and found queries by key
    (a service that applied the effect and then failed answers its result to a query)."""
    answers: dict[facts.LogicalCall, set[str]] = collections.defaultdict(set)
    calls_by_key: dict[tuple[str, str], facts.LogicalCall] = {}
    for request in facts.tool_requests(history):
        call = facts.logical_call(request.tool, request.arguments)
        if request.key is not None:
            calls_by_key[(request.tool, request.key)] = call
        if request.outcome in ANSWERED_OUTCOMES:
            answers[call].add(facts.canonical(request.result))
    for entry in history.tools:
        if isinstance(entry, ledger.ToolQuery) and entry.found:
            queried = calls_by_key.get((entry.tool, entry.key))
            if queried is not None:
                answers[queried].add(facts.canonical(entry.result))
    return answers


def _reply_fact(delivered: list[ledger.ReplyDelivery]) -> str:
    if not delivered:
        return "no reply delivered, none to compare"
    seqs = ", ".join(str(delivery.seq) for delivery in delivered)
    return f"reply delivered as scripted (delivery seq {seqs})"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    answered = facts.model_requests(history, answered_only=True)
    failures: list[str] = []
    notes: list[str] = []
    if not answered:
        return verdict.decide(
            INVARIANT,
            failures=[],
            notes=[],
            unknowns=[
                "no model request was answered: no transcript to check"
                + (f", because {why}" if (why := reach.cut_short(history)) else "")
            ],
            passed="",
        )
    for request in answered:
        for problem in request.problems:
            failures.append(f"model request seq {request.seq} (turn {request.turn}): {problem}")

    # The last request carries every call of the earlier scripted turns, answered once.
    last = answered[-1]
    scripted = facts.scripted_calls(history)
    made = collections.Counter(facts.assistant_call_ids(last))
    answers = collections.Counter(message.call_id for message in facts.tool_messages(last))
    expected = [call for call in scripted.values() if call.turn < last.turn]
    for call in expected:
        if made[call.id] != 1 or answers[call.id] != 1:
            failures.append(
                f"last model request seq {last.seq}: call {call.id!r} {call.call} made "
                f"{made[call.id]} times and answered {answers[call.id]} times (expected 1 and 1)"
            )
    notes.append(
        f"last model request seq {last.seq} (turn {last.turn}) carries the "
        f"{len(expected)} earlier scripted calls"
    )

    # An `ok` tool message carries the world's answer, never an invented one.
    world = _world_answers(history)
    seen: set[tuple[str, str | None]] = set()
    compared = 0
    for request in facts.model_requests(history):
        for message in facts.tool_messages(request):
            if (message.call_id, message.raw) in seen or message.content is None:
                continue
            seen.add((message.call_id, message.raw))
            if message.content.get("status") != "ok" or message.call_id not in scripted:
                continue
            logical = scripted[message.call_id].call
            compared += 1
            result = facts.canonical(message.content.get("result"))
            where = f"model request seq {request.seq}: ok message for {message.call_id!r} {logical}"
            if logical not in world:
                failures.append(f"{where} carries {result}, but the world never answered it ok")
            elif result not in world[logical]:
                failures.append(
                    f"{where} carries {result}, not what the world answered "
                    f"({', '.join(sorted(world[logical]))})"
                )

    # The delivered reply is the scripted one.
    wanted = facts.expected_reply(history)
    delivered = facts.deliveries(history)
    for delivery in delivered:
        if wanted is not None and delivery.content != wanted:
            failures.append(
                f"delivery seq {delivery.seq}: content {delivery.content!r} is not the "
                f"scripted reply {wanted!r}"
            )
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        passed=(
            f"last model request seq {last.seq} (turn {last.turn}) carries all "
            f"{len(expected)} earlier scripted calls, each made and answered once; "
            f"{len(answered)} answered requests without a transcript problem; {compared} ok "
            f"results as the world answered; {_reply_fact(delivered)}"
        ),
    )
