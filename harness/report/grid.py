"""The boundary x scenario grid, one for the terminal table and the HTML matrix page alike:
which row a trial is counted in, and the rows in the order both show them.

Boundaries go down and scenarios across: thirteen rows stay readable however many scenarios.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from harness.contract import boundaries

BASELINE = "baseline"
# One row for every moment a time kill was drawn at: each draw is a different number.
TIME_ROW = "time:+Ns"


class Step(Protocol):
    """A planned fault (harness/faults): all the grid reads of it is where it strikes."""

    @property
    def point(self) -> str: ...


def row_of(plan: Sequence[Step]) -> str:
    """The row of a trial: the base boundary of its first fault (a `:before_commit` twin
    shares its boundary's row), its black-box point (`world:tool.effect`), or baseline."""
    if not plan:
        return BASELINE
    point = plan[0].point
    if boundaries.time_point_seconds(point) is not None:
        return TIME_ROW
    return boundaries.base_name(point)


def rows(used: Iterable[str]) -> list[str]:
    """Baseline and every boundary, reached or not; then the other rows trials `used`
    (black-box points), in the order first met."""
    out = [BASELINE, *boundaries.BOUNDARIES]
    for name in used:
        if name not in out:
            out.append(name)
    return out
