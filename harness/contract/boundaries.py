"""Named durable boundaries (harness/CONTRACT.md section 2).

An engine reports `<name>` right after the transaction that makes it durable commits and,
for the names in BEFORE_COMMIT, also `<name>:before_commit` just before COMMIT is sent.
"""

from __future__ import annotations

import re

BOUNDARIES: tuple[str, ...] = (
    "run.claimed",
    "model.pending",
    "model.returned",
    "tools.pending",
    "tool.started",
    "tool.returned",
    "tool.settled",
    "model.ready",
    "reply.ready",
    "reply.sending",
    "reply.sent",
    "run.finished",
)
# Reported only where a scenario has the engine purge a finished run (its optional `purge`
# command, CONTRACT.md section 5): `run.purged` once the purge committed. Not part of
# `boundaries: all`, so an engine without retention declares nothing it cannot reach.
RETENTION: tuple[str, ...] = ("run.purged",)

BEFORE_COMMIT: frozenset[str] = frozenset(
    {
        "model.pending",
        "tools.pending",
        "tool.started",
        "tool.settled",
        "model.ready",
        "reply.ready",
        "reply.sending",
        "run.finished",
        "run.purged",
    }
)

BEFORE_COMMIT_SUFFIX = ":before_commit"

# Boundaries inside a model-call window: a kill here may cost one extra model call.
MODEL_WINDOW: frozenset[str] = frozenset({"model.pending", "model.returned"})
# Boundaries inside a tool-execution window: the tool's outcome is not recorded yet.
TOOL_WINDOW: frozenset[str] = frozenset({"tool.started", "tool.returned"})
# Points inside the delivery window: the reply may or may not have reached the sink, and
# no delivery is recorded yet. The window closes when the transaction recording the
# delivery (the terminal one) commits, so its :before_commit point is still inside.
DELIVERY_WINDOW: frozenset[str] = frozenset(
    {"reply.sending", "reply.sent", "run.finished" + BEFORE_COMMIT_SUFFIX}
)


def all_points() -> list[str]:
    """Every point an engine may report: each boundary, and its before_commit twin."""
    points: list[str] = []
    for name in BOUNDARIES:
        if name in BEFORE_COMMIT:
            points.append(name + BEFORE_COMMIT_SUFFIX)
        points.append(name)
    return points


def base_name(point: str) -> str:
    """`tools.pending:before_commit` -> `tools.pending`."""
    return point.removesuffix(BEFORE_COMMIT_SUFFIX)


def retention_points() -> list[str]:
    """`run.purged:before_commit`, `run.purged`: the points of a purge."""
    return [p for name in RETENTION for p in (name + BEFORE_COMMIT_SUFFIX, name)]


def is_known(point: str) -> bool:
    return point in set(all_points()) or point in retention_points()


POINT_REF = re.compile(r"^(?P<point>[a-z._:]+)(#(?P<occurrence>\d+))?$")


def parse_ref(text: str) -> tuple[str, int] | None:
    """`tool.settled#2` -> ("tool.settled", 2); `reply.ready` -> (.., 1); None if unknown."""
    match = POINT_REF.match(text.strip())
    if not match or not is_known(match["point"]):
        return None
    return match["point"], int(match["occurrence"] or 1)


# Black-box points (harness/CONTRACT.md section 6): the world, not the engine, reports them.
# `world:<event>` when the world answers a model call, applies a tool effect (its response
# not yet sent) or accepts a reply; `time:+<seconds>s` after the first model answer.
WORLD_POINTS: tuple[str, ...] = (
    "world:model.answered",
    "world:tool.effect",
    "world:reply.accepted",
)
# The boundary each world point stands for (section 6's table): the effect happened
# outside, the engine has not recorded it. The world trigger records it with the hit
# (BoundaryHit.stands_for); a time point stands for none.
STANDS_FOR: dict[str, str] = {
    "world:model.answered": "model.returned",
    "world:tool.effect": "tool.returned",
    "world:reply.accepted": "reply.sent",
}
TIME_POINT = re.compile(r"^time:\+(?P<seconds>\d+(\.\d+)?)s$")


def is_world_point(point: str) -> bool:
    return point in WORLD_POINTS


def time_point_seconds(point: str) -> float | None:
    """`time:+0.35s` -> 0.35; None for any other point."""
    match = TIME_POINT.match(point)
    return float(match["seconds"]) if match else None


def is_blackbox_point(point: str) -> bool:
    # checkers ask this of every hit many times: an engine's own point is told at once
    if not point.startswith(("world:", "time:")):
        return False
    return is_world_point(point) or time_point_seconds(point) is not None
