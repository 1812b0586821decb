"""Named durable boundaries (see ../shared/DESIGN.md and harness/CONTRACT.md).

An engine reports `<name>` right after the transaction that makes it durable commits and,
for the names in BEFORE_COMMIT, also `<name>:before_commit` just before COMMIT is sent.
"""

from __future__ import annotations

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
    }
)

BEFORE_COMMIT_SUFFIX = ":before_commit"

# Boundaries inside a model-call window: a kill here may cost one extra model call.
MODEL_WINDOW: frozenset[str] = frozenset({"model.pending", "model.returned"})
# Boundaries inside a tool-execution window: the tool's outcome is not recorded yet.
TOOL_WINDOW: frozenset[str] = frozenset({"tool.started", "tool.returned"})
# Boundaries inside the delivery window: the reply may or may not have reached the sink.
DELIVERY_WINDOW: frozenset[str] = frozenset({"reply.sending", "reply.sent"})


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


def is_known(point: str) -> bool:
    return point in set(all_points())
