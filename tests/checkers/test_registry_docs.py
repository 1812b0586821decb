"""The invariants CONTRACT.md and the README list are the checkers' registry, in its order.

The tables are generated (`python -m harness.report.invariant_table --write`) from the
registry, harness/checkers/descriptions.py and harness/checkers/levels.py. A checker added
without its words, a table edited by hand or left behind, or a count ("all thirteen" over a
list of fourteen) that no longer says how many there are fails here.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from harness import checkers
from harness.checkers import applied, descriptions, levels
from harness.report import invariant_table

REPO = pathlib.Path(__file__).resolve().parents[2]
CONTRACT = (REPO / "harness" / "CONTRACT.md").read_text()
README = (REPO / "README.md").read_text()
# Every other page that may count the invariants in prose.
DOCS = {
    str(path.relative_to(REPO)): path.read_text()
    for path in sorted(
        [
            *(REPO / "docs").glob("*.md"),
            REPO / "harness" / "INCIDENTS.md",
            *(REPO / "tests" / "contract").glob("*/README.md"),
        ]
    )
}
COUNT = invariant_table.count_word()


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def table_ids(text: str) -> list[str]:
    """The ids in the first column of a markdown table's rows, backticks dropped."""
    return re.findall(r"^\| *`?([a-z_]+\.[a-z_]+)`? *\|", text, flags=re.MULTILINE)


def test_every_registered_invariant_and_result_has_its_words() -> None:
    assert list(descriptions.INVARIANTS) == list(checkers.INVARIANTS)
    assert list(descriptions.BESIDE) == [applied.PLAN, applied.ACTIONS]
    for described in [*descriptions.INVARIANTS.values(), *descriptions.BESIDE.values()]:
        for words in (described.holds_when, described.evidence):
            # A table cell: one line, no column separator.
            assert words.strip() and "|" not in words and "\n" not in words


def test_the_tables_in_readme_and_contract_are_what_the_registry_generates() -> None:
    stale = invariant_table.stale()
    assert not stale, f"{stale} differ from the registry: run {invariant_table.COMMAND}"


def test_contract_section_7_lists_the_registry_in_order() -> None:
    seven = section(CONTRACT, "## 7. Invariants", "### Decided questions")
    assert table_ids(seven) == list(checkers.INVARIANTS)


def test_readme_lists_the_registry_in_order_then_the_results_beside_it() -> None:
    after = README.split("## Invariants", 1)[1].split("### Conformance levels", 1)[0]
    assert table_ids(after) == [*checkers.INVARIANTS, applied.PLAN, applied.ACTIONS]


def test_contract_section_8_lists_each_levels_invariants_as_levels_py_does() -> None:
    """Section 8's table is prose for buyers, kept by hand; its invariants column is not."""
    eight = section(CONTRACT, "## 8. Conformance levels", "## 9.")
    rows = {
        cells[0]: cells[1]
        for line in eight.splitlines()
        if line.startswith("| ")
        and (cells := [c.strip() for c in line.strip("|").split("|")])[0]
        in {spec.level.value for spec in levels.LEVELS}
    }
    assert list(rows) == [spec.level.value for spec in levels.LEVELS]
    for spec in levels.LEVELS:
        if spec.requires == checkers.INVARIANTS:
            assert rows[spec.level.value] == f"all {COUNT} of section 7"
        else:
            assert re.findall(r"`([a-z_.]+)`", rows[spec.level.value]) == list(spec.requires)


def test_a_new_checker_makes_the_tables_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator follows the registry: one more invariant, one more row and count."""
    extra = descriptions.Described(holds_when="it holds", evidence="the history")
    monkeypatch.setattr(checkers, "INVARIANTS", (*checkers.INVARIANTS, "new.invariant"))
    monkeypatch.setitem(descriptions.INVARIANTS, "new.invariant", extra)
    assert "| `new.invariant` | it holds | the history |" in invariant_table.contract_table()
    assert invariant_table.readme_table().startswith(
        f"{invariant_table.WORDS[len(checkers.INVARIANTS)].capitalize()} invariants"
    )
    # README's levels table too: FULL lists "all N" of the registry.
    assert invariant_table.stale() == [f"{t.path}: {t.name}" for t in invariant_table.TARGETS]


def test_an_invariant_without_words_is_named() -> None:
    with pytest.raises(KeyError, match=r"no\.such has no entry in harness/checkers/descriptions"):
        invariant_table._described("no.such")


def test_splice_replaces_only_what_lies_between_the_markers() -> None:
    target = invariant_table.TARGETS[0]
    text = f"before\n{target.start}\nold\n{target.end}\nafter\n"
    new = invariant_table.splice(text, target)
    assert new == f"before\n{target.start}\n{target.render()}\n{target.end}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        invariant_table.splice("no markers here", target)


def test_every_count_of_the_invariants_is_the_registrys() -> None:
    assert f"): {COUNT} invariants." in CONTRACT
    assert f"| FULL | all {COUNT} of section 7 |" in CONTRACT
    assert f"{COUNT} **checkers** judge" in README
    assert f"| all {COUNT} |" in README
    for name, text in {"CONTRACT.md": CONTRACT, "README.md": README, **DOCS}.items():
        stale = [
            word
            for word in invariant_table.WORDS[10:]
            if word != COUNT and re.search(rf"\ball {word}\b|\b{word} (checkers|invariants)", text)
        ]
        assert not stale, f"{name}: {stale}, the registry has {COUNT}"
