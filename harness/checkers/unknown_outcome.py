"""`tool.unknown_outcome`: interrupted non-replayable calls are never re-executed blindly.

(a) a call the final report marks `outcome_unknown` is presented to the model as such;
(b) after a fault struck inside a non-replayable call's tool window, the call is not
    requested again: a tool that honours keys, asked again with the same key, applied
    nothing twice; a queryable tool may be asked by key and, when nothing was applied and
    the interrupted worker is dead (kill), run again; a worker that survived (pause,
    database cut, ...) may still send its own request, which no query can rule out. A
    killed call that was not asked again ends `outcome_unknown`;
(c) the report never claims a non-replayable call succeeded when the world saw no effect.
"""

from __future__ import annotations

from harness import boundaries
from harness import history as history_module
from harness.checkers import facts, verdict
from harness.world import ledger

INVARIANT = "tool.unknown_outcome"
UNKNOWN = "outcome_unknown"


def _told_model(
    history: history_module.TrialHistory,
    call_id: str,
    turn: int,
    failures: list[str],
    notes: list[str],
) -> None:
    requests = facts.model_requests(history)
    for request in requests:
        for message in facts.tool_messages(request):
            if message.call_id != call_id:
                continue
            status = message.content.get("status") if message.content else None
            line = (
                f"call {call_id!r} (report: {UNKNOWN}): first model request with its tool "
                f"message is seq {request.seq}, status {status!r}"
            )
            (notes if status == UNKNOWN else failures).append(line)
            return
    went_on = [request.seq for request in requests if request.turn > turn]
    if went_on:
        failures.append(
            f"call {call_id!r} (report: {UNKNOWN}) is missing from every model request, "
            f"though the run went on to the model (request seq {went_on[0]})"
        )
    else:
        notes.append(f"call {call_id!r} (report: {UNKNOWN}): no later model request")


def _interrupted_call(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    scripted: dict[str, facts.ScriptedCall],
) -> facts.LogicalCall | None:
    assert item.hit is not None
    call_id = item.hit.detail.get("tool_call_id")
    if isinstance(call_id, str) and call_id in scripted:
        return scripted[call_id].call
    if item.hit.point == "tool.returned":
        # The call in flight: the last request the world saw before the hit.
        before = [request for request in facts.tool_requests(history) if request.t <= item.hit.t]
        if before:
            return facts.logical_call(before[-1].tool, before[-1].arguments)
    return None


def _judge_repeats(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    call: facts.LogicalCall,
    failures: list[str],
    notes: list[str],
) -> list[ledger.ToolRequest]:
    spec = history.scenario.tool(call.tool)
    attempts = [
        request
        for request in facts.tool_requests(history)
        if facts.logical_call(request.tool, request.arguments) == call
    ]
    prior = [request for request in attempts if request.t < item.start]
    repeats = [request for request in attempts if request.t > item.start]
    if repeats and not prior and item.fault.action != "kill":
        # The interrupted worker survived and may still send its one original request.
        notes.append(
            f"{call}: request seq {repeats[0].seq} after a {item.fault.action} can be the "
            "interrupted worker's own call in flight (in-flight remote calls are not fenceable)"
        )
        repeats = repeats[1:]
    where = f"{call} interrupted by {item.describe()}"
    survived = item.fault.action != "kill"
    for repeat in repeats:
        keys = {request.key for request in [*prior, repeat]}
        if spec.honours_idempotency_key and repeat.key and keys == {repeat.key}:
            notes.append(
                f"{where} was requested again at seq {repeat.seq} with the same key "
                f"{repeat.key!r}; the tool honours keys, so the world applied no second effect"
            )
            continue
        if not spec.queryable:
            failures.append(
                f"{where} was requested again at seq {repeat.seq} (key {repeat.key!r}): a "
                "non-replayable call whose outcome is unknown must not be re-executed"
            )
            continue
        queries = [
            query
            for query in facts.tool_queries(history)
            if query.tool == call.tool
            and query.key == repeat.key
            and item.start < query.t < repeat.t
        ]
        if not queries:
            failures.append(
                f"{where} was requested again at seq {repeat.seq} (key {repeat.key!r}) "
                "without first asking the tool by that key"
            )
        elif queries[-1].found:
            failures.append(
                f"{where}: query seq {queries[-1].seq} found the effect applied, yet the "
                f"call was requested again at seq {repeat.seq}"
            )
        elif survived:
            # "Not applied yet" says nothing about the request the survivor may still send.
            failures.append(
                f"{where} was re-executed at seq {repeat.seq} after query seq "
                f"{queries[-1].seq} found nothing, but the interrupted worker survived the "
                f"{item.fault.action}: the query cannot rule out its call in flight"
            )
        else:
            notes.append(
                f"{where}: asked by key {repeat.key!r} (query seq {queries[-1].seq}, not "
                f"found) before requesting again at seq {repeat.seq}"
            )
    return repeats


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    failures: list[str] = []
    notes: list[str] = []
    unknowns: list[str] = []
    scripted = facts.scripted_calls(history)
    report = history.final_report
    reported = {call.id: call for call in report.tool_calls} if report else {}

    # (a) an unknown outcome reaches the model as such.
    for call_id, call_report in reported.items():
        if call_report.state == UNKNOWN:
            turn = scripted[call_id].turn if call_id in scripted else call_report.turn
            _told_model(history, call_id, turn, failures, notes)

    # (b) no blind re-execution after an interruption inside a tool window.
    interrupted = 0
    for item in facts.struck_in(history, boundaries.TOOL_WINDOW):
        interrupted += 1
        call = _interrupted_call(history, item, scripted)
        if call is None:
            unknowns.append(
                f"{item.describe()} struck in a tool window without detail.tool_call_id: "
                "cannot tell which call was interrupted"
            )
            continue
        if not facts.is_non_replayable(history, call.tool):
            notes.append(f"{call} interrupted by {item.describe()}: replayable, may run again")
            continue
        repeats = _judge_repeats(history, item, call, failures, notes)
        spec = history.scenario.tool(call.tool)
        if item.fault.action == "kill" and not spec.queryable and not repeats and report:
            ids = [cid for cid, known in scripted.items() if known.call == call]
            states = {cid: reported[cid].state for cid in ids if cid in reported}
            wrong = {cid: state for cid, state in states.items() if state != UNKNOWN}
            if report.terminal and wrong:
                failures.append(
                    f"{call} killed in its tool window and never asked again, yet the final "
                    f"report says {wrong} instead of {UNKNOWN}"
                )

    # (c) no success claimed for an effect that never happened.
    effects = {facts.logical_call(e.tool, e.arguments) for e in facts.tool_effects(history)}
    for call_id, call_report in reported.items():
        if call_report.state != "succeeded" or not facts.is_non_replayable(
            history, call_report.name
        ):
            continue
        if call_id not in scripted:
            notes.append(f"report names call {call_id!r}, which the script does not make")
        elif scripted[call_id].call not in effects:
            failures.append(
                f"report says non-replayable call {call_id!r} {scripted[call_id].call} "
                "succeeded, but the world has no effect of it"
            )

    if not interrupted and not any(c.state == UNKNOWN for c in reported.values()):
        notes.insert(0, "no interrupted tool call")
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed="no blind re-execution; unknown outcomes reported as such",
    )
