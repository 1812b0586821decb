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

from harness.report import certify_table

SECTION = "## Certification table"
START = "<!-- certification table: rewritten by `bash ci/certify_frameworks.sh` -->"
END = "<!-- end of certification table -->"


def rows_of(markdown: str) -> list[str]:
    """The table rows certify wrote under SECTION, header and rule left out."""
    if SECTION not in markdown:
        return []
    table = markdown.split(SECTION, 1)[1]
    return [
        line
        for line in table.splitlines()
        if line.startswith("| ") and line not in certify_table.HEADER.splitlines()
    ]


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
