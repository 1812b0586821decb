"""The phase transitions CONTRACT.md gives framework authors ("Certifying a framework") are
the ones `frontier.monotonic` allows (harness/checkers/frontier.py), both ways."""

from __future__ import annotations

import pathlib
import re

from harness.checkers import frontier

CONTRACT = (pathlib.Path(__file__).resolve().parents[2] / "harness" / "CONTRACT.md").read_text()


def documented() -> dict[str, frozenset[str]]:
    section = CONTRACT[CONTRACT.index("### Certifying a framework") :]
    section = section[: section.index("\n## ")]
    table = section[section.index("| from | to |") :].split("\n\n")[0]
    rows = re.findall(r"^ *\| `([a-z_]+)` \| (.+?) \|$", table, flags=re.MULTILINE)
    return {source: frozenset(re.findall(r"`([a-z_]+)`", targets)) for source, targets in rows}


def test_the_contract_lists_every_transition_the_checker_allows_and_no_other() -> None:
    assert documented() == frontier.ALLOWED


def test_the_table_is_sorted_as_a_reader_looks_things_up() -> None:
    table = documented()
    assert list(table) == sorted(table)
