"""The dated certification table in docs/frameworks.md, rewritten from certificates.

`crashcert certify --markdown F` ends F with a "Certification table" section (HEADER and
one row per mode, certify_table.rows). ci/certify_frameworks.sh collects those rows from
every framework's certificate and puts them between the document's two markers:

    python -m harness.report.certify_doc docs/frameworks.md out/*.md
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Iterable, Sequence

from harness.checkers import levels
from harness.report import certify_table

SECTION = "## Certification table"
START = "<!-- certification table: rewritten by `bash ci/certify_frameworks.sh` -->"
END = "<!-- end of certification table -->"


# The header certify wrote before the "level rests on" column: its rows are given that
# column from their own level cell, so certificates of either age make one table.
OLD_HEADER = (
    "| framework | version | variant | mode | level | faults run | coverage "
    "| invariants not held, and why | date | crashcert |"
)
LEVEL_CELL = 5  # in a row split on " | ", the cell after the leading "| framework"


def rows_of(markdown: str) -> list[str]:
    """The table rows certify wrote under SECTION, header and rule left out."""
    if SECTION not in markdown:
        return []
    table = markdown.split(SECTION, 1)[1]
    old = OLD_HEADER in table.splitlines()
    return [
        _with_rests_on(line) if old else line
        for line in table.splitlines()
        if line.startswith("| ")
        and line not in certify_table.HEADER.splitlines()
        and line != OLD_HEADER
    ]


def _with_rests_on(row: str) -> str:
    """An old row with the fault classes its level rests on put after the level."""
    cells = row.split(" | ")
    level = levels.parse(cells[LEVEL_CELL - 1].split(" (", 1)[0])
    return " | ".join([*cells[:LEVEL_CELL], certify_table.rests_on(level), *cells[LEVEL_CELL:]])


def table(rows: Iterable[str]) -> str:
    return "\n".join([certify_table.HEADER, *rows])


def splice(document: str, rows: Iterable[str]) -> str:
    """`document` with the table between START and END replaced by HEADER and `rows`."""
    head, found, rest = document.partition(START)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"markers {START!r} ... {END!r} missing")
    return f"{head}{START}\n{table(rows)}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.certify_doc")
    parser.add_argument("document", type=pathlib.Path, help="e.g. docs/frameworks.md")
    parser.add_argument(
        "certificates", type=pathlib.Path, nargs="+", help="certify --markdown files"
    )
    args = parser.parse_args(argv)
    rows = [row for path in args.certificates for row in rows_of(path.read_text("utf-8"))]
    if not rows:
        print("no certification rows found: the table is left as it was", file=sys.stderr)
        return 1
    document = args.document.read_text("utf-8")
    args.document.write_text(splice(document, rows), "utf-8")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
