"""Judging a black-box history: world hits read as the boundaries they stand for. Pure.

A black box reports no boundaries; the world triggered its faults
(harness/nemesis/world_trigger.py). `judge` reads its world hits as boundaries
(`tool.effect` -> tool.returned, `reply.accepted` -> reply.sent, `model.answered` ->
model.returned), and invariants that need the engine's own boundaries (`lease.fencing`)
say INCONCLUSIVE instead of passing by default.
"""

from __future__ import annotations

import collections

from harness import checkers
from harness.checkers import facts
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import spec
from harness.record import history

MODEL_ANSWERED, TOOL_EFFECT, REPLY_ACCEPTED = boundaries.WORLD_POINTS
# The boundary each world point stands for (harness/CONTRACT.md section 6's table): the
# effect happened outside, the engine has not recorded it.
EQUIVALENT = {
    MODEL_ANSWERED: "model.returned",
    TOOL_EFFECT: "tool.returned",
    REPLY_ACCEPTED: "reply.sent",
}
# Translated hits get occurrences far from any the engine reports itself.
OCCURRENCE_OFFSET = 1000
# Invariants judged from the engine's own boundaries only: never PASS in a black box.
NEEDS_BOUNDARIES = ("lease.fencing",)
# Invariants INCONCLUSIVE in a black box because the hits they read were not collected.
SHOWN_BY_BOUNDARIES = ("model.once_after_decision", "frontier.monotonic")
NOT_COLLECTED = "black-box mode, the engine's own boundaries not collected"


def is_black_box(trial: history.TrialHistory) -> bool:
    """No hit of the engine's own: only the world (or nothing) reported."""
    return not any(not boundaries.is_blackbox_point(hit.point) for hit in trial.boundary_hits())


def translated(trial: history.TrialHistory) -> history.TrialHistory:
    """The history with world hits as the boundaries they stand for, time hits dropped."""
    renamed: dict[spec.PointRef, spec.PointRef] = {}
    events: list[history.Event] = []
    call_ids = _effect_call_ids(trial)
    for event in trial.events:
        if isinstance(event, history.BoundaryHit) and boundaries.is_blackbox_point(event.point):
            if event.point not in EQUIVALENT:
                continue  # a time point marks no place in the engine's work
            occurrence = OCCURRENCE_OFFSET + event.occurrence
            point = EQUIVALENT[event.point]
            world = spec.PointRef(point=event.point, occurrence=event.occurrence)
            renamed[world] = spec.PointRef(point=point, occurrence=occurrence)
            detail = {**event.detail, facts.WORLD_POINT_DETAIL: f"{event.point}#{event.occurrence}"}
            if event.point == TOOL_EFFECT and detail.get("ledger_seq") in call_ids:
                detail["tool_call_id"] = call_ids[detail["ledger_seq"]]
            event = event.model_copy(
                update={"point": point, "occurrence": occurrence, "detail": detail}
            )
        events.append(event)
    fixed: list[history.Event] = []
    for event in events:
        struck = event.struck_at if isinstance(event, history.FaultApplied) else None
        if struck is not None and struck in renamed:
            # The step keeps the world point it planned; where it struck reads as the boundary.
            event = event.model_copy(update={"struck_at": renamed[struck]})
        fixed.append(event)
    return trial.model_copy(update={"events": fixed})


def _effect_call_ids(trial: history.TrialHistory) -> dict[int, str]:
    """Ledger seq of each tool effect -> the scripted call it belongs to.

    By its idempotency key when the engine names that key for one call of the same tool
    and arguments (report `tool_calls`, tool.started/tool.settled details); else by its
    tool and arguments when one scripted call alone has them. Two calls with equal
    arguments and no named key are not guessed: the checkers then judge by key.
    """
    scripted = facts.scripted_calls(trial)
    owners: dict[str, list[str]] = collections.defaultdict(list)
    for call_id, key in facts.named_keys(trial).items():
        if call_id in scripted:
            owners[key].append(call_id)
    by_call: dict[facts.LogicalCall, list[str]] = collections.defaultdict(list)
    for known in scripted.values():
        by_call[known.call].append(known.id)
    found = {}
    for effect in facts.tool_effects(trial):
        call = facts.logical_call(effect.tool, effect.arguments)
        named = [cid for cid in owners.get(effect.key or "", []) if scripted[cid].call == call]
        candidates = named if named else by_call.get(call, [])
        if len(candidates) == 1:
            found[effect.seq] = candidates[0]
    return found


def judge(trial: history.TrialHistory) -> list[verdict_module.CheckResult]:
    """check_all, reading world hits as boundaries; no PASS without the evidence for it."""
    has_world = any(boundaries.is_blackbox_point(hit.point) for hit in trial.boundary_hits())
    results = checkers.check_all(translated(trial) if has_world else trial)
    if not is_black_box(trial):
        return results
    return [_black_box_result(trial, result) for result in results]


def _black_box_result(
    trial: history.TrialHistory, result: verdict_module.CheckResult
) -> verdict_module.CheckResult:
    declared = trial.declared_boundaries
    unshown = (verdict_module.Verdict.PASS, verdict_module.Verdict.INCONCLUSIVE)
    if result.invariant in NEEDS_BOUNDARIES and result.verdict in unshown:
        # The first reason it cannot be shown, whatever else the checker found missing.
        return _unproven(result, _no_claims(declared))
    if result.verdict is verdict_module.Verdict.INCONCLUSIVE and declared:
        if result.invariant in SHOWN_BY_BOUNDARIES:
            # "not reported" means: not collected in this trial, not "the engine has none".
            return result.model_copy(
                update={
                    "summary": f"{NOT_COLLECTED}: {result.summary}",
                    "evidence": [*result.evidence, NOT_COLLECTED],
                }
            )
    if result.verdict is not verdict_module.Verdict.PASS:
        return result
    time_kills = [
        fault
        for fault in trial.faults()
        if fault.ok
        and fault.action == "kill"
        and fault.planned is not None
        and boundaries.time_point_seconds(fault.planned.point) is not None
    ]
    non_replayable = any(tool.replay == "non_replayable" for tool in trial.scenario.tools)
    if result.invariant == "tool.unknown_outcome" and time_kills and non_replayable:
        return _unproven(result, "a time kill cannot be placed inside or outside a tool window")
    return result


def _no_claims(declared: list[str] | None) -> str:
    """Why handovers cannot be seen, in words true of this engine."""
    if declared is None:
        return "no run.claimed was recorded in this trial: handovers are invisible"
    if facts.CLAIM_POINT in declared:
        return (
            "the engine reports run.claimed, but this trial ran it as a black box (no control "
            "channel): handovers are invisible"
        )
    return "the engine reports no run.claimed: handovers are invisible"


def _unproven(result: verdict_module.CheckResult, why: str) -> verdict_module.CheckResult:
    return verdict_module.CheckResult(
        invariant=result.invariant,
        verdict=verdict_module.Verdict.INCONCLUSIVE,
        summary=f"black box: {why}",
        evidence=[f"black box: {why}", f"the checker alone said: {result.summary}"],
    )
