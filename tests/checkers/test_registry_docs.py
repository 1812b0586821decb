"""The invariants CONTRACT.md and the README list are the checkers' registry, in its order.

A checker added without its row, a row left for a checker gone, or a count ("all thirteen"
over a list of twelve) that no longer says how many there are fails here.
"""

from __future__ import annotations

import pathlib
import re

from harness import checkers

REPO = pathlib.Path(__file__).resolve().parents[2]
CONTRACT = (REPO / "harness" / "CONTRACT.md").read_text()
README = (REPO / "README.md").read_text()
WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
COUNT = WORDS[len(checkers.INVARIANTS)]


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def table_ids(text: str) -> list[str]:
    """The ids in the first column of a markdown table's rows, backticks dropped."""
    return re.findall(r"^\| *`?([a-z_]+\.[a-z_]+)`? *\|", text, flags=re.MULTILINE)


def test_contract_section_7_lists_the_registry_in_order() -> None:
    seven = section(CONTRACT, "## 7. Invariants", "### Decided questions")
    assert table_ids(seven) == list(checkers.INVARIANTS)


def test_readme_lists_the_registry_in_order() -> None:
    after = README.split("## Invariants", 1)[1]
    table = next(block for block in after.split("\n\n") if block.startswith("| id |"))
    assert table_ids(table) == list(checkers.INVARIANTS)


def test_every_count_of_the_invariants_is_the_registrys() -> None:
    assert f"): {COUNT} invariants." in CONTRACT
    assert f"| FULL | all {COUNT} of section 7 |" in CONTRACT
    assert f"{COUNT} **checkers** judge" in README
    assert f"| all {COUNT} |" in README
    for text in (CONTRACT, README):
        stale = [
            word
            for word in WORDS[10:]
            if word != COUNT and re.search(rf"\ball {word}\b|\b{word} (checkers|invariants)", text)
        ]
        assert not stale, stale
