"""Fault plans: which fault where. Seeded and pure; talks to no process.

A baseline trial records the sequence of (point, occurrence) hits; the crash matrix then
kills once at each of them (the `:before_commit` points included), optionally killing the
recovering worker a second time right after it claims the run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import pydantic

from harness import errors
from harness.contract import boundaries
from harness.scenario import schema as scenario_module
from harness.scenario import validation
from harness.trial import history

FAULT_SYNTAX = re.compile(
    r"^(?P<action>[a-z_]+)@(?P<point>[a-z._:]+|time:\+[0-9.]+s)(#(?P<occurrence>\d+))?"
    r"(\?(?P<params>[a-z_]+=[A-Za-z0-9_.:#-]+(&[a-z_]+=[A-Za-z0-9_.:#-]+)*))?$"
)
MATRIX_FAULTS = (
    "kill",
    "pause",
    "db_cut",
    "commit_lost",
    "commit_dropped",
    "latency",
    "pg_restart",
)
# Faults that break something the nemesis mends later (`heal_after_s`, or `heal_at` a point).
HEALED_FAULTS = frozenset({"db_cut", "commit_lost", "commit_dropped", "latency", "pg_restart"})
# Faults that only mean something while a transaction waits for its COMMIT.
COMMIT_FAULTS = frozenset({"commit_lost", "commit_dropped"})
# After the terminal commit no lease is held: pausing or cutting there proves nothing new.
HOLDS_LEASE_UNTIL = "run.finished"
# The params a fault understands (harness/faults/nemesis.py), each by kind. Times are bounded like
# a scenario's deadline: a heal or a time point beyond it only stalls the trial.
FAULT_PARAMS = {
    "same_worker_id": "flag",  # kill: restart the killed worker under the same id
    "heal_after_s": "seconds",  # heal the fault after this long
    "heal_at": "point",  # heal when any worker reports this point (checked below)
    "resume_after_s": "seconds",  # pause: SIGCONT at the latest after this long
    "latency_ms": "milliseconds",  # latency: the delay added to the link
}
MAX_FAULT_S = scenario_module.MAX_DEADLINE_S
MAX_FAULT_LATENCY_MS = scenario_module.MAX_LATENCY_MS


def parse_fault(text: str) -> history.FaultStep:
    """`kill@tools.pending#1` -> FaultStep(kill, tools.pending, 1).

    Params follow a `?`: `kill@run.claimed#1?same_worker_id=true`, `db_cut@...?heal_after_s=2`,
    `db_cut@...?heal_at=tool.settled#1` (heal when any worker reports that point).
    """
    match = FAULT_SYNTAX.match(text.strip())
    if not match:
        raise errors.CrashcertError(
            f"bad fault {text!r}: expected ACTION@POINT[#OCCURRENCE][?NAME=VALUE&...], "
            "e.g. kill@tools.pending#1"
        )
    point = match["point"]
    if not (boundaries.is_known(point) or boundaries.is_blackbox_point(point)):
        raise errors.CrashcertError(
            f"bad fault {text!r}: unknown point {point!r}; "
            f"known: {', '.join(boundaries.all_points())}; black box: "
            f"{', '.join(boundaries.WORLD_POINTS)}, time:+SECONDSs"
        )
    seconds = boundaries.time_point_seconds(point)
    if seconds is not None and seconds > MAX_FAULT_S:
        raise errors.CrashcertError(
            f"bad fault {text!r}: {point} is beyond {MAX_FAULT_S:g} seconds, "
            "longer than any scenario's deadline"
        )
    try:
        step = history.FaultStep(
            action=match["action"],  # type: ignore[arg-type]
            point=point,
            occurrence=int(match["occurrence"] or 1),
            params=_params(match["params"]),
        )
    except pydantic.ValidationError as error:  # one line, naming the part: action, occurrence
        raise errors.CrashcertError(f"bad fault {text!r}: {validation.describe(error)}") from None
    except ValueError as error:
        raise errors.CrashcertError(f"bad fault {text!r}: {error}") from None
    _check_commit_point(text, step)
    _check_heal_at(text, step)
    return step


def _check_commit_point(text: str, step: history.FaultStep) -> None:
    """A lost or dropped COMMIT needs a COMMIT in flight: a `:before_commit` point. Anywhere
    else nothing is held, the fault strikes no transaction and the checkers see nothing."""
    if step.action not in COMMIT_FAULTS or step.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX):
        return
    if step.point in boundaries.BEFORE_COMMIT:
        hint = f": use {step.point}{boundaries.BEFORE_COMMIT_SUFFIX}"
    else:
        twins = [p for p in boundaries.all_points() if p.endswith(boundaries.BEFORE_COMMIT_SUFFIX)]
        hint = f", and {step.point} has none; points with one: {', '.join(twins)}"
    raise errors.CrashcertError(
        f"bad fault {text!r}: {step.action} strikes a COMMIT in flight, so it needs a "
        f"{boundaries.BEFORE_COMMIT_SUFFIX} point{hint}"
    )


def _check_heal_at(text: str, step: history.FaultStep) -> None:
    """`db_cut@tools.pending#1?heal_at=tool.settled#1`: heal when any worker reports that."""
    heal_at = step.params.get("heal_at")
    if heal_at is None:
        return
    if step.action not in HEALED_FAULTS:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at only applies to {', '.join(sorted(HEALED_FAULTS))}"
        )
    if boundaries.parse_ref(str(heal_at)) is None:
        raise errors.CrashcertError(
            f"bad fault {text!r}: heal_at={heal_at} is not a known point "
            "(e.g. heal_at=tool.settled#1)"
        )


def _params(text: str | None) -> dict[str, Any]:
    """`same_worker_id=true&heal_after_s=2.5` -> {"same_worker_id": True, "heal_after_s": 2.5}.

    Every name known, given once, its value of its kind and within bounds; ValueError says
    which is not.
    """
    params: dict[str, Any] = {}
    for item in text.split("&") if text else []:
        name, _, raw = item.partition("=")
        if name not in FAULT_PARAMS:
            raise ValueError(f"unknown param {name!r}; known: {', '.join(sorted(FAULT_PARAMS))}")
        if name in params:
            raise ValueError(f"param {name!r} given twice")
        params[name] = _param_value(name, raw)
    return params


def _param_value(name: str, raw: str) -> Any:
    kind = FAULT_PARAMS[name]
    if kind == "flag":
        if raw not in ("true", "false"):
            raise ValueError(f"{name}={raw}: expected true or false")
        return raw == "true"
    if kind == "seconds":
        try:
            # An integer stays one, so the step's label reads as it was written.
            seconds: float = int(raw) if raw.isdigit() else float(raw)
        except ValueError:
            raise ValueError(f"{name}={raw}: expected a number of seconds") from None
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_FAULT_S):
            raise ValueError(f"{name}={raw}: expected seconds above 0, at most {MAX_FAULT_S:g}")
        return seconds
    if kind == "milliseconds":
        if not raw.isdigit() or not 0 < int(raw) <= MAX_FAULT_LATENCY_MS:
            raise ValueError(
                f"{name}={raw}: expected whole milliseconds from 1 to {MAX_FAULT_LATENCY_MS}"
            )
        return int(raw)
    return raw  # a point: _check_heal_at knows it


def parse_fault_classes(text: str) -> list[str]:
    """`kill,pause` -> ["kill", "pause"], every one a known fault class, at least one."""
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [fault for fault in chosen if fault not in MATRIX_FAULTS]
    if unknown or not chosen:
        raise errors.CrashcertError(
            f"unknown fault classes {unknown or chosen}; known: {', '.join(MATRIX_FAULTS)}"
        )
    return chosen


def parse_points(text: str | None, *, known: Sequence[str] = boundaries.BOUNDARIES) -> list[str]:
    """`reply.sending,reply.sent` -> the names, every one known; empty means all."""
    chosen = [part.strip() for part in (text or "").split(",") if part.strip()]
    unknown = [point for point in chosen if point not in known]
    if unknown:
        raise errors.CrashcertError(f"unknown points {unknown}; known: {', '.join(known)}")
    return chosen


def at_points(
    plans: list[list[history.FaultStep]], points: Sequence[str] | None
) -> list[list[history.FaultStep]]:
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
) -> list[list[history.FaultStep]]:
    plans: list[list[history.FaultStep]] = []
    for point, occurrence in trace:
        first = history.FaultStep(action="kill", point=point, occurrence=occurrence)
        plans.append([first])
        if second_kill and point != "run.finished":
            # Kill the recovering worker too, right after it claims the run: recovery
            # itself must be crash-safe. (After run.finished nothing recovers.)
            upto = trace[: trace.index((point, occurrence)) + 1]
            claims = sum(1 for seen, _ in upto if seen == "run.claimed")
            again = history.FaultStep(action="kill", point="run.claimed", occurrence=claims + 1)
            plans.append([first, again])
    return plans


def fault_plans(
    trace: list[tuple[str, int]], faults: list[str], *, second_kill: bool = False
) -> list[list[history.FaultStep]]:
    """One trial per applicable (fault, point, occurrence) of the baseline trace."""
    plans: list[list[history.FaultStep]] = []
    for fault in faults:
        if fault not in MATRIX_FAULTS:
            raise errors.CrashcertError(f"unknown fault class {fault!r}; known: {MATRIX_FAULTS}")
        if fault == "kill":
            plans.extend(kill_plans(trace, second_kill=second_kill))
            continue
        for point, occurrence in trace:
            before_commit = point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
            if fault in COMMIT_FAULTS and not before_commit:
                continue
            if fault not in COMMIT_FAULTS and boundaries.base_name(point) == HOLDS_LEASE_UNTIL:
                continue
            action: Any = fault
            plans.append([history.FaultStep(action=action, point=point, occurrence=occurrence)])
    return plans


def plan_label(plan: list[history.FaultStep]) -> str:
    return "+".join(step.label() for step in plan) or "baseline"


def unreached(points: tuple[str, ...], traces: list[list[tuple[str, int]]]) -> list[str]:
    """Declared points that no baseline reached: the matrix cannot vouch for them."""
    reached = {point for trace in traces for point, _ in trace}
    return [point for point in points if point not in reached]
