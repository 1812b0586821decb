"""Judging a black-box history: no PASS without the evidence for it. Pure.

A black box reports no boundaries; the world triggered its faults
(harness/nemesis/world_trigger.py), and each world hit carries the boundary it stands for
(`BoundaryHit.stands_for`: `world:tool.effect` -> tool.returned, `world:reply.accepted` ->
reply.sent, `world:model.answered` -> model.returned), which the checkers read through
`facts.point`: the history is judged as recorded. Invariants that need the engine's own
boundaries (`lease.fencing`) say INCONCLUSIVE instead of passing by default.
"""

from __future__ import annotations

from harness import checkers
from harness.checkers import facts, verdict
from harness.contract import boundaries
from harness.record import history

# Invariants judged from the engine's own boundaries only: never PASS in a black box.
NEEDS_BOUNDARIES = ("lease.fencing",)
# Invariants INCONCLUSIVE in a black box because the hits they read were not collected.
SHOWN_BY_BOUNDARIES = ("model.once_after_decision", "frontier.monotonic")
NOT_COLLECTED = "black-box mode, the engine's own boundaries not collected"


def is_black_box(trial: history.TrialHistory) -> bool:
    """No hit of the engine's own: only the world (or nothing) reported."""
    return not any(not boundaries.is_blackbox_point(hit.point) for hit in trial.boundary_hits())


def judge(trial: history.TrialHistory) -> list[verdict.CheckResult]:
    """check_all on the history as recorded; no PASS without the evidence for it."""
    results = checkers.check_all(trial)
    if not is_black_box(trial):
        return results
    return [_black_box_result(trial, result) for result in results]


def _black_box_result(
    trial: history.TrialHistory, result: verdict.CheckResult
) -> verdict.CheckResult:
    declared = trial.declared_boundaries
    unshown = (verdict.Verdict.PASS, verdict.Verdict.INCONCLUSIVE)
    if result.invariant in NEEDS_BOUNDARIES and result.verdict in unshown:
        # The first reason it cannot be shown, whatever else the checker found missing.
        return _unproven(result, _no_claims(declared))
    if result.verdict is verdict.Verdict.INCONCLUSIVE and declared:
        if result.invariant in SHOWN_BY_BOUNDARIES:
            # "not reported" means: not collected in this trial, not "the engine has none".
            return result.model_copy(
                update={
                    "summary": f"{NOT_COLLECTED}: {result.summary}",
                    "evidence": [*result.evidence, NOT_COLLECTED],
                }
            )
    if result.verdict is not verdict.Verdict.PASS:
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


def _unproven(result: verdict.CheckResult, why: str) -> verdict.CheckResult:
    return verdict.CheckResult(
        invariant=result.invariant,
        verdict=verdict.Verdict.INCONCLUSIVE,
        summary=f"black box: {why}",
        evidence=[f"black box: {why}", f"the checker alone said: {result.summary}"],
    )
