"""Check summaries worded as the checkers word them, for certificates built from recorded
trial results (tests of levels and of merged certify shards)."""

from __future__ import annotations

FRONTIER = "frontier.monotonic"


def fields(invariant: str) -> dict[str, object]:
    """A PASS's summary, and for frontier.monotonic the durable flag frontier.check sets
    when it judged an exported checkpoints table."""
    return {"summary": summary(invariant), **({"durable": True} if invariant == FRONTIER else {})}


def summary(invariant: str) -> str:
    """A PASS summary; frontier.monotonic's reads an exported checkpoints table, as
    frontier.check words it, so the PASS counts as durable evidence."""
    return (
        "4 checkpoint rows from v1 to v4, each step an allowed transition"
        if invariant == FRONTIER
        else "s"
    )
