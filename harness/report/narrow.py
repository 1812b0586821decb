"""Rows for a narrow or non-terminal console (a CI log read at 80 columns): one line per
scenario (or invariant) with its verdict and counts, then what did not pass, named in full
and wrapped between names. A grid with one column per scenario cuts every cell to "…" at
80 columns; a wide terminal keeps the grid (grid.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import rich.console
import rich.measure
import rich.table
import rich.text

from harness.checkers import verdict as verdict_module
from harness.report import terminal

Verdict = verdict_module.Verdict
Item = str | rich.text.Text
INDENT = 4
# Longer names are not padded: the counts follow after two spaces.
NAME_COLUMN = 40
UNBOUNDED = 100_000
LOG_COLUMNS = 80
VERDICT_COLUMN = max(len(v.value) for v in Verdict)


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    verdict: Verdict
    counts: rich.text.Text
    # (heading, items) lines under the row, e.g. ("FAIL at", [trial labels]).
    notes: Sequence[tuple[terminal.Part, Sequence[Item]]] = ()


def grid_fits(console: rich.console.Console, table: rich.table.Table) -> bool:
    """A terminal wide enough for every cell of `table` in full. A log that is not a
    terminal gets rows whatever its width: it is read in a browser, grepped, or pasted."""
    if not console.is_terminal:
        return False
    # Measured without the console's limit, which would clamp the answer to fit it.
    unbounded = console.options.update(width=UNBOUNDED, max_width=UNBOUNDED)
    return rich.measure.Measurement.get(console, unbounded, table).maximum <= console.width


def print_rows(console: rich.console.Console, title: str, rows: Iterable[Row]) -> None:
    console.print(title, soft_wrap=True)
    chosen = list(rows)
    # A log's reader may be as narrow as 80 columns whatever width the console was given
    # (terminal.make_console gives a log 160, for the tables that stay tables).
    wrap = console.width if console.is_terminal else min(console.width, LOG_COLUMNS)
    width = min(max((len(row.name) for row in chosen), default=0), NAME_COLUMN)
    for row in chosen:
        head = terminal.verdict(row.verdict, f"{row.verdict.value:{VERDICT_COLUMN}}")
        console.print(terminal.line(head, f" {row.name:{width}}  ", row.counts), soft_wrap=True)
        for heading, items in row.notes:
            for text in packed(heading, items, width=wrap):
                console.print(text, soft_wrap=True)  # already wrapped: never folded again


def packed(heading: terminal.Part, items: Sequence[Item], *, width: int) -> list[rich.text.Text]:
    """`    heading: a, b,` lines no wider than `width`, each item whole on one line (one
    longer than the width gets a line of its own rather than being cut)."""
    lines = [terminal.line(" " * INDENT, heading, ":")]
    empty = False  # the last line holds no item yet: the next one goes on it, fit or not
    for index, item in enumerate(items):
        piece = (rich.text.Text(item) if isinstance(item, str) else item.copy()) + (
            "," if index < len(items) - 1 else ""
        )
        if not empty and len(lines[-1].plain) + 1 + len(piece.plain) > width:
            lines.append(rich.text.Text(" " * (INDENT + 2)))
            empty = True
        lines[-1] = lines[-1] + ("" if empty else " ") + piece
        empty = False
    return lines
