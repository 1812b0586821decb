"""`tool.unknown_outcome`: interrupted non-replayable calls are never re-executed blindly.

(a) a call the final report marks `outcome_unknown` is presented to the model as such;
(b) after a fault struck inside a non-replayable call's tool window, the call is not
    requested again: a tool that honours keys, asked again with the same key, applied
    nothing twice; a queryable tool may be asked by key and, when nothing was applied and
    the interrupted worker is dead (kill), run again; a worker that survived (pause,
    database cut, ...) may still send its own request, which no query can rule out. A
    killed call that was not asked again ends `outcome_unknown`;
(c) the report never claims a non-replayable call succeeded when the world saw no effect.

A replayable call is judged by (b) like a non-replayable one when its tool was redeployed
(its fingerprint changed) after the call had been sent: the contract replays a started call
only under the fingerprint it was started with.
"""

from __future__ import annotations

import collections
import dataclasses

from harness.checkers import facts, reach, verdict
from harness.contract import boundaries, run_report
from harness.record import history as history_module
from harness.world import ledger

INVARIANT = "tool.unknown_outcome"
UNKNOWN = "outcome_unknown"


def _told_model(
    history: history_module.TrialHistory,
    call_id: str,
    turn: int,
    failures: list[str],
    notes: list[str],
    decisive: list[str],
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
            decisive.append(
                f"call {call_id!r} ended {UNKNOWN} and the model was told so (model request "
                f"seq {request.seq})"
            )
            return
    went_on = [request.seq for request in requests if request.turn > turn]
    if went_on:
        failures.append(
            f"call {call_id!r} (report: {UNKNOWN}) is missing from every model request, "
            f"though the run went on to the model (request seq {went_on[0]})"
        )
    else:
        notes.append(f"call {call_id!r} (report: {UNKNOWN}): no later model request")
        decisive.append(f"call {call_id!r} ended {UNKNOWN}; the run asked the model no more")


@dataclasses.dataclass(frozen=True)
class _Interrupted:
    call: facts.LogicalCall
    call_id: str | None  # the scripted call, when the hit or its key tells
    key: str | None  # the key it carries, when known


def _interrupted_call(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    scripted: dict[str, facts.ScriptedCall],
    named: dict[str, str],
) -> _Interrupted | None:
    assert item.hit is not None
    call_id = facts.hit_call_id(history, item.hit)
    key = item.hit.detail.get("key")
    key = key if isinstance(key, str) else None
    # A key the engine named for one call says which of equal calls this is (a black box's
    # world hit names no id: facts.hit_call_id guesses it from the effect's arguments).
    owners = [cid for cid, named_key in named.items() if named_key == key and cid in scripted]
    if len(owners) == 1:
        call_id = owners[0]
    if isinstance(call_id, str) and call_id in scripted:
        return _Interrupted(scripted[call_id].call, call_id, key or named.get(call_id))
    if facts.point(item.hit) == "tool.returned":
        # The call in flight: the last request the world saw before the hit.
        before = [request for request in facts.tool_requests(history) if request.t <= item.hit.t]
        if before:
            last = before[-1]
            return _Interrupted(facts.logical_call(last.tool, last.arguments), None, last.key)
    return None


def _attempts(
    history: history_module.TrialHistory,
    target: _Interrupted,
    item: facts.Interruption,
    scripted: dict[str, facts.ScriptedCall],
    named: dict[str, str],
    unknowns: list[str],
) -> list[ledger.ToolRequest]:
    """Requests of the interrupted call: those of its (tool, arguments), less those under
    a key the engine named for another scripted call with equal arguments."""
    requests = [
        request
        for request in facts.tool_requests(history)
        if facts.logical_call(request.tool, request.arguments) == target.call
    ]
    twins = [
        cid
        for cid, known in scripted.items()
        if known.call == target.call and cid != target.call_id
    ]
    twin_keys = {named[cid] for cid in twins if cid in named} - {target.key}
    attempts = [request for request in requests if request.key not in twin_keys]
    others = facts.scripted_count(history, target.call) - 1
    if len(twin_keys) >= others:
        return attempts
    # Some call with equal arguments carries a key nobody named: a later request under
    # another key may be that call's own, not a repeat of this one.
    unclear = [
        request
        for request in attempts
        if request.t > item.start and (target.key is None or request.key != target.key)
    ]
    if unclear:
        unknowns.append(
            f"{target.call} interrupted by {item.describe()}: request seq "
            f"{[request.seq for request in unclear]} may answer another of the "
            f"{others + 1} calls with these arguments (the engine names no key for it)"
        )
    return [request for request in attempts if request not in unclear]


def _judge_repeats(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    call: facts.LogicalCall,
    attempts: list[ledger.ToolRequest],
    failures: list[str],
    notes: list[str],
    decisive: list[str],
    what: str = "a non-replayable call",
) -> list[ledger.ToolRequest]:
    spec = history.scenario.tool(call.tool)
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
    short = f"{call} interrupted by {_struck(item)}"
    survived = item.fault.action != "kill"
    for repeat in repeats:
        keys = {request.key for request in [*prior, repeat]}
        if spec.honours_idempotency_key and repeat.key and keys == {repeat.key}:
            notes.append(
                f"{where} was requested again at seq {repeat.seq} with the same key "
                f"{repeat.key!r}; the tool honours keys, so the world applied no second effect"
            )
            decisive.append(
                f"{short}: requested again with the same key {repeat.key!r} (seq "
                f"{repeat.seq}), which the tool honours: no second effect"
            )
            continue
        if not spec.queryable:
            failures.append(
                f"{where} was requested again at seq {repeat.seq} (key {repeat.key!r}): "
                f"{what} whose outcome is unknown must not be re-executed"
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
            decisive.append(
                f"{short}: asked by key {repeat.key!r}, not found (query seq "
                f"{queries[-1].seq}), and only then run again (seq {repeat.seq})"
            )
    return repeats


def _changed_under(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    tool: str,
    attempts: list[ledger.ToolRequest],
) -> tuple[ledger.ToolRedeploy, list[ledger.ToolRequest]] | None:
    """The redeploy of the tool after this call was sent, and the attempts to judge: those
    before the fault and those after the redeploy. None when the call was not sent under
    the old fingerprint: a kill leaves only requests before the fault as the call's own; a
    503 (applied false) started nothing; nor for a redeploy that came only after the call
    was run again under its unchanged fingerprint, and was not requested after it."""
    for change in facts.redeploys(history, tool):
        sent = [
            request
            for request in attempts
            if request.seq < change.seq
            and request.outcome != "failed_before_effect"
            and (request.t < item.start or item.fault.action != "kill")
        ]
        # Run again after the fault under the fingerprint it was started with, and never
        # after the change: the replay the contract allows resolved it before the redeploy.
        resumed = [
            request
            for request in attempts
            if request.t >= item.start
            and request.seq < change.seq
            and request.outcome != "failed_before_effect"
        ]
        if resumed and not [request for request in attempts if request.seq > change.seq]:
            continue
        if sent:
            judged = [r for r in attempts if r.t < item.start or r.seq > change.seq]
            return change, judged
    return None


def _struck(item: facts.Interruption) -> str:
    """`kill at tool.returned#2`: the fault and where it struck, for a one-line summary."""
    return f"{item.fault.action} at {facts.hit_name(item.hit)}" if item.hit else item.fault.action


def _not_repeated(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    target: _Interrupted,
    state: str | None,
) -> str:
    """What happened instead of a re-execution: an answer by key, or nothing at all."""
    named = f" (call {target.call_id!r})" if target.call_id else ""
    short = f"{target.call}{named} interrupted by {_struck(item)}"
    asked = [
        query
        for query in facts.tool_queries(history)
        if query.tool == target.call.tool
        and query.t > item.start
        and (target.key is None or query.key == target.key)
    ]
    reported = f", reported {state}" if state else ""
    if not asked:
        return f"{short}: not requested again{reported}"
    last = asked[-1]
    found = "found applied" if last.found else "not found"
    return (
        f"{short}: asked by key {last.key!r}, {found} (query seq {last.seq}), not "
        f"re-executed{reported}"
    )


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    found = _Found()
    scripted = facts.scripted_calls(history)
    report = history.final_report
    reported = {call.id: call for call in report.tool_calls} if report else {}
    _unknown_told_to_the_model(history, scripted, reported, found)
    interrupted = _no_blind_reexecution(history, scripted, reported, found)
    _no_success_without_effect(history, scripted, reported, found)

    nothing = "no fault struck inside a tool window and no call ended outcome_unknown"
    if not interrupted and not any(c.state == UNKNOWN for c in reported.values()):
        found.notes.insert(0, nothing)
        if not found.failures and not found.unknowns:
            # A run that stopped short may have been interrupted by its own crash instead.
            if unproven := reach.nothing_to_judge(INVARIANT, nothing, history, found.notes):
                return unproven
    return verdict.decide(
        INVARIANT,
        failures=found.failures,
        notes=found.notes,
        unknowns=found.unknowns,
        passed="; ".join(found.decisive) or nothing,
    )


@dataclasses.dataclass
class _Found:
    failures: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    unknowns: list[str] = dataclasses.field(default_factory=list)
    decisive: list[str] = dataclasses.field(default_factory=list)  # what a PASS rests on


def _unknown_told_to_the_model(
    history: history_module.TrialHistory,
    scripted: dict[str, facts.ScriptedCall],
    reported: dict[str, run_report.ToolCallReport],
    found: _Found,
) -> None:
    """(a) An unknown outcome reaches the model as such."""
    for call_id, call_report in reported.items():
        if call_report.state == UNKNOWN:
            turn = scripted[call_id].turn if call_id in scripted else call_report.turn
            _told_model(history, call_id, turn, found.failures, found.notes, found.decisive)


def _no_blind_reexecution(
    history: history_module.TrialHistory,
    scripted: dict[str, facts.ScriptedCall],
    reported: dict[str, run_report.ToolCallReport],
    found: _Found,
) -> int:
    """(b) No blind re-execution after an interruption inside a tool window; returns how
    many faults struck inside one."""
    named = facts.named_keys(history)
    interrupted = 0
    for item in facts.struck_in(history, boundaries.TOOL_WINDOW):
        interrupted += 1
        target = _interrupted_call(history, item, scripted, named)
        if target is None:
            found.unknowns.append(
                f"{item.describe()} struck in a tool window without detail.tool_call_id: "
                "cannot tell which call was interrupted"
            )
            continue
        _judge_interrupted(history, item, target, scripted, reported, named, found)
    return interrupted


def _judge_interrupted(
    history: history_module.TrialHistory,
    item: facts.Interruption,
    target: _Interrupted,
    scripted: dict[str, facts.ScriptedCall],
    reported: dict[str, run_report.ToolCallReport],
    named: dict[str, str],
    found: _Found,
) -> None:
    """One call interrupted in its tool window: was it run again, and how."""
    failures, notes, unknowns, decisive = (
        found.failures,
        found.notes,
        found.unknowns,
        found.decisive,
    )
    call = target.call
    replayable = not facts.is_non_replayable(history, call.tool)
    attempts: list[ledger.ToolRequest] = []
    if not replayable or facts.redeploys(history, call.tool):
        attempts = _attempts(history, target, item, scripted, named, unknowns)
    changed = _changed_under(history, item, call.tool, attempts) if replayable else None
    if replayable and changed is None:
        notes.append(f"{call} interrupted by {item.describe()}: replayable, may run again")
        decisive.append(f"{call} interrupted by {_struck(item)}: replayable, may run again")
        return
    what = "a non-replayable call"
    if changed is not None:
        change, attempts = changed
        what = (
            f"a call sent before its tool was redeployed (seq {change.seq}, fingerprint "
            f"now {change.fingerprint})"
        )
        notes.append(
            f"{call} interrupted by {item.describe()}: replayable, but {call.tool} was "
            f"redeployed at seq {change.seq} (fingerprint {change.fingerprint}) after the "
            "call was sent: judged as non-replayable"
        )
    repeats = _judge_repeats(history, item, call, attempts, failures, notes, decisive, what=what)
    if not repeats:
        known = reported.get(target.call_id or "")
        state = known.state if known else None
        decisive.append(_not_repeated(history, item, target, state))
    spec = history.scenario.tool(call.tool)
    if item.fault.action == "kill" and not spec.queryable and not repeats:
        _killed_ends_unknown(history, target, scripted, reported, failures)


def _killed_ends_unknown(
    history: history_module.TrialHistory,
    target: _Interrupted,
    scripted: dict[str, facts.ScriptedCall],
    reported: dict[str, run_report.ToolCallReport],
    failures: list[str],
) -> None:
    """A call killed in its tool window and never asked again ends outcome_unknown."""
    report = history.final_report
    if not report:
        return
    call = target.call
    if target.call_id is not None:
        ids = [target.call_id]
    elif facts.scripted_count(history, call) == 1:
        ids = [cid for cid, known in scripted.items() if known.call == call]
    else:  # which of the equal calls it was is unknown: judge none of them
        ids = []
    states = {cid: reported[cid].state for cid in ids if cid in reported}
    wrong = {cid: state for cid, state in states.items() if state != UNKNOWN}
    if report.terminal and wrong:
        failures.append(
            f"{call} killed in its tool window and never asked again, yet the final "
            f"report says {wrong} instead of {UNKNOWN}"
        )


def _no_success_without_effect(
    history: history_module.TrialHistory,
    scripted: dict[str, facts.ScriptedCall],
    reported: dict[str, run_report.ToolCallReport],
    found: _Found,
) -> None:
    """(c) No success claimed for an effect that never happened: as many effects of a
    (tool, arguments) as calls with them the report says succeeded."""
    effects = collections.Counter(
        facts.logical_call(e.tool, e.arguments) for e in facts.tool_effects(history)
    )
    succeeded: dict[facts.LogicalCall, list[str]] = collections.defaultdict(list)
    for call_id, call_report in reported.items():
        if call_report.state != "succeeded" or not facts.is_non_replayable(
            history, call_report.name
        ):
            continue
        if call_id not in scripted:
            found.notes.append(f"report names call {call_id!r}, which the script does not make")
        else:
            succeeded[scripted[call_id].call].append(call_id)
    for call, ids in succeeded.items():
        if len(ids) == 1 and not effects[call]:
            found.failures.append(
                f"report says non-replayable call {ids[0]!r} {call} succeeded, but the world "
                "has no effect of it"
            )
        elif len(ids) > effects[call]:
            found.failures.append(
                f"report says non-replayable calls {sorted(ids)} {call} succeeded, but the "
                f"world has {effects[call]} effect(s) of them"
            )
