"""Fault plans: which fault where. Seeded and pure; talks to no process.

A baseline trial records the sequence of (point, occurrence) hits; the crash matrix then
kills once at each of them (the `:before_commit` points included), optionally killing the
recovering worker a second time right after it claims the run. Other fault classes strike
where harness/faults/spec.py says they apply. A black box is also killed at seeded moments
of a baseline's span (`time:+Xs`), and a rerun strikes where such a kill landed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from harness import errors
from harness.contract import boundaries
from harness.faults import spec
from harness.record import history
from harness.world import ledger

# Time kills are drawn in this part of the baseline's span (first model answer -> terminal).
TIME_SPAN = (0.05, 0.95)
# Where a time kill landed: the last world point before it and its ledger seq (hit detail,
# written by harness/nemesis/world_trigger.py). A wall-clock offset does not reproduce a
# trial; the world event before it does.
AFTER_WORLD_POINT, AFTER_LEDGER_SEQ = "after_world_point", "after_ledger_seq"
# The grammar is spec.parse; this name stays only until the last callers (work in flight
# elsewhere) have moved to it.
parse_fault = spec.parse


def parse_points(text: str | None, *, known: Sequence[str] = boundaries.BOUNDARIES) -> list[str]:
    """`reply.sending,reply.sent` -> the names, every one known; empty means all."""
    chosen = [part.strip() for part in (text or "").split(",") if part.strip()]
    if text is not None and not chosen:  # `--points ,,` is a typo, not "every point"
        raise errors.CrashcertError(f"--points {text[:40]!r} names no point")
    unknown = [point for point in chosen if point not in known]
    if unknown:
        raise errors.CrashcertError(f"unknown points {unknown}; known: {', '.join(known)}")
    return chosen


def at_points(
    plans: list[list[spec.FaultStep]], points: Sequence[str] | None
) -> list[list[spec.FaultStep]]:
    """The plans whose first fault strikes at one of `points` (all when none are given).
    A point names its `:before_commit` twin too: `--points tools.pending` faults both."""
    if not points:
        return plans
    return [steps for steps in plans if boundaries.base_name(steps[0].point) in points]


def baseline_trace(trial: history.TrialHistory) -> list[tuple[str, int]]:
    """The (point, occurrence) hits of the trial's own run, in order."""
    return [
        (hit.point, hit.occurrence)
        for hit in trial.boundary_hits()
        if trial.run_id is None or hit.run_id in (None, trial.run_id)
    ]


def kill_plans(
    trace: list[tuple[str, int]], *, second_kill: bool = False
) -> list[list[spec.FaultStep]]:
    plans: list[list[spec.FaultStep]] = []
    for point, occurrence in trace:
        first = spec.FaultStep(action="kill", point=point, occurrence=occurrence)
        plans.append([first])
        if second_kill and spec.recovery_follows(point):
            # Kill the recovering worker too, right after it claims the run: recovery
            # itself must be crash-safe.
            upto = trace[: trace.index((point, occurrence)) + 1]
            claims = sum(1 for seen, _ in upto if seen == "run.claimed")
            again = spec.FaultStep(action="kill", point="run.claimed", occurrence=claims + 1)
            plans.append([first, again])
    return plans


@dataclasses.dataclass(frozen=True)
class WorldTrace:
    """The world points of a baseline's run, counted as world_trigger counts them."""

    points: list[tuple[str, int]]
    streamed: frozenset[int]  # occurrences of world:model.answered asked with stream: true


def world_trace(trial: history.TrialHistory) -> WorldTrace:
    """Read from the world's ledgers, so a baseline of an engine that reports boundaries
    (no world trigger ran) still says where the world answered, applied and accepted."""
    model_answered, tool_effect, reply_accepted = boundaries.WORLD_POINTS
    entries: list[tuple[int, str, bool]] = [
        (entry.seq, model_answered, entry.stream)
        for entry in trial.model
        if entry.run_key == trial.run_key and entry.status_code == 200
    ]
    entries += [
        (e.seq, tool_effect, False) for e in trial.tools if isinstance(e, ledger.ToolEffect)
    ]
    entries += [
        (e.seq, reply_accepted, False) for e in trial.sink if isinstance(e, ledger.ReplyDelivery)
    ]
    counts: dict[str, int] = {}
    points: list[tuple[str, int]] = []
    streamed: set[int] = set()
    for _, point, stream in sorted(entries):
        counts[point] = counts.get(point, 0) + 1
        points.append((point, counts[point]))
        if stream:
            streamed.add(counts[point])
    return WorldTrace(points, frozenset(streamed))


def _world_points(
    fault: str, trace: list[tuple[str, int]], world: WorldTrace | None
) -> list[tuple[str, int]]:
    """Where a fault of the world's response strikes. A stream is cut only where the engine
    streamed; an engine that never streams gets one stream_cut, at the first answer, which
    the world records as not applicable (plan.applied INCONCLUSIVE, never a PASS)."""
    points = trace if world is None else world.points
    found = [hit for hit in points if spec.applies_at(fault, hit[0])]
    if fault != "stream_cut" or world is None:
        return found
    return [hit for hit in found if hit[1] in world.streamed] or found[:1]


def fault_plans(
    trace: list[tuple[str, int]],
    faults: list[str],
    *,
    second_kill: bool = False,
    world: WorldTrace | None = None,
) -> list[list[spec.FaultStep]]:
    """One trial per applicable (fault, point, occurrence) of the baseline trace; a per-run
    fault (submit_twice) one per value of its choice param; a fault of the world's response
    at the world points of `world` (the trace's own when None)."""
    plans: list[list[spec.FaultStep]] = []
    for fault in faults:
        if fault not in spec.MATRIX:
            raise errors.CrashcertError(f"unknown fault class {fault!r}; known: {spec.MATRIX}")
        if fault == "kill":
            plans.extend(kill_plans(trace, second_kill=second_kill))
            continue
        if spec.CATALOG[fault].per_run:  # the run as a whole: once per choice, no point
            plans.extend(
                [spec.FaultStep(action=fault, point=spec.RUN_POINT, params=params)]
                for params in spec.per_run_choices(fault)
            )
            continue
        points = _world_points(fault, trace, world) if fault in spec.IN_WORLD else trace
        choices = spec.per_run_choices(fault) if spec.CATALOG[fault].each_choice else [{}]
        for point, occurrence in points:
            if spec.applies_at(fault, point):
                plans.extend(
                    [spec.FaultStep(action=fault, point=point, occurrence=occurrence, params=p)]
                    for p in choices
                )
    return plans


def plan_label(plan: list[spec.FaultStep]) -> str:
    return "+".join(step.label() for step in plan) or "baseline"


def unreached(points: tuple[str, ...], traces: list[list[tuple[str, int]]]) -> list[str]:
    """Declared points that no baseline reached: the matrix cannot vouch for them."""
    reached = {point for trace in traces for point, _ in trace}
    return [point for point in points if point not in reached]


# --- time kills (black box) ----------------------------------------------------------------


def time_plans(trial: history.TrialHistory, *, count: int, seed: int) -> list[list[spec.FaultStep]]:
    """`count` seeded kills at moments inside a baseline's span, one trial each."""
    answered = [e.t for e in trial.model if e.run_key == trial.run_key and e.status_code == 200]
    end = trial.finished_at or trial.ended_at
    if not answered or count <= 0 or end <= answered[0]:
        return []
    span = end - answered[0]
    chooser = random.Random(f"{seed}:{trial.scenario.name}")
    moments = sorted({round(span * chooser.uniform(*TIME_SPAN), 2) for _ in range(count)})
    return [
        [spec.FaultStep(action="kill", point=f"time:+{max(moment, 0.01):.2f}s")]
        for moment in moments
    ]


def rerun_step(trial: history.TrialHistory, step: spec.FaultStep) -> spec.FaultStep:
    """The step a rerun should plan: a time kill strikes again at the world point it landed
    after (a wall-clock offset lands elsewhere on another run); any other step as it was."""
    if boundaries.time_point_seconds(step.point) is None:
        return step
    for hit in trial.boundary_hits():
        if hit.point != step.point or hit.occurrence != step.occurrence:
            continue
        point, _, occurrence = str(hit.detail.get(AFTER_WORLD_POINT, "")).rpartition("#")
        if boundaries.is_world_point(point) and occurrence.isdigit():
            return step.model_copy(update={"point": point, "occurrence": int(occurrence)})
    return step
