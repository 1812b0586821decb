"""The matrix summary in an 80-column CI log (not a terminal): every scenario named in full
with its verdict and counts, every trial that did not pass named; a wide terminal keeps the
boundary x scenario grid."""

from __future__ import annotations

import io
import pathlib
import re

import rich.console

from harness.checkers import verdict
from harness.faults import spec as fault_spec
from harness.planning import plan
from harness.record import history
from harness.report import narrow, summary
from harness.scenario import schema as scenario
from harness.trial import runner

V = verdict.Verdict
NAMES = sorted(path.stem for path in pathlib.Path("scenarios").glob("*.yaml"))
POINTS = ["kill@tools.pending#1", "kill@tool.started:before_commit#1", "kill@world:tool.effect#1"]


def outcome(name: str, fault: str | None, result: verdict.Verdict) -> runner.TrialOutcome:
    found = scenario.find("refund").model_copy(update={"name": name})
    steps = [fault_spec.parse(fault)] if fault else []
    spec = runner.TrialSpec(scenario=found, plan=steps, label=plan.plan_label(steps) or "baseline")
    return runner.TrialOutcome(
        spec=spec,
        history=history.TrialHistory(trial_id="t", engine="e", scenario=found, run_key="k"),
        results=[],
        verdict=result,
        directory=pathlib.Path(f"/tmp/{name}"),
        repro=f"crashcert run --scenario {name}",
    )


def matrix() -> tuple[list[runner.TrialOutcome], dict[str, tuple[V, list[str]]]]:
    """Outcomes of every catalogued scenario, and what each row must say: the scenario's
    verdict and the labels of its trials that did not pass. Every third scenario fails
    at every point, every fifth has an INCONCLUSIVE, the rest pass."""
    outcomes, expected = [], {}
    for index, name in enumerate(NAMES):
        outcomes.append(outcome(name, None, V.PASS))
        bad: list[str] = []
        for point in POINTS:
            result = V.FAIL if index % 3 == 0 else V.INCONCLUSIVE if index % 5 == 0 else V.PASS
            outcomes.append(outcome(name, point, result))
            if result is not V.PASS:
                bad.append(outcomes[-1].spec.label)
        worst = V.FAIL if index % 3 == 0 else V.INCONCLUSIVE if index % 5 == 0 else V.PASS
        expected[name] = (worst, bad)
    return outcomes, expected


def row_of(lines: list[str], name: str) -> int | None:
    """The index of `name`'s row: `VERDICT  name  counts` (a failing trial's own lines
    below the rows also start with its verdict and scenario, then its label)."""
    found = [
        i
        for i, line in enumerate(lines)
        if re.fullmatch(rf"[A-Z]+ +{re.escape(name)} +[FEIP]\d+( [FEIP]\d+)*", line)
    ]
    assert len(found) <= 1, name
    return found[0] if found else None


def render(console: rich.console.Console, outcomes: list[runner.TrialOutcome]) -> list[str]:
    summary.print_summary(outcomes, console=console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_an_80_column_log_names_every_scenario_its_verdict_and_each_failing_point() -> None:
    outcomes, expected = matrix()
    console = rich.console.Console(file=io.StringIO(), width=80, force_terminal=False)
    lines = render(console, outcomes)
    assert all(len(line) <= 80 for line in lines if not line.lstrip().startswith("rerun:"))
    assert not any("…" in line for line in lines)
    assert len(NAMES) >= 30  # the catalogue the grid once cut to "…"
    for name, (worst, bad) in expected.items():
        index = row_of(lines, name)
        assert index is not None, name
        head = lines[index].split()
        assert head[0] == worst.value, name
        letters = {V.FAIL: "F", V.INCONCLUSIVE: "I"}
        assert head[2:] == ([f"{letters[worst]}{len(bad)}"] if bad else []) + [
            f"P{4 - len(bad)}"
        ], name
        notes: list[str] = []
        for line in lines[index + 1 :]:
            if not line.startswith(" " * narrow.INDENT):
                break
            notes += line.replace(",", " ").split()
        named = [word for word in notes if "@" in word]
        assert named == bad, name  # each failing point whole, none missing, none extra
        if bad:
            assert notes[:2] == [worst.value, "at:"], name


def test_a_log_wraps_at_80_columns_whatever_its_console_width() -> None:
    outcomes, _ = matrix()
    wide_log = rich.console.Console(file=io.StringIO(), width=160, force_terminal=False)
    lines = render(wide_log, outcomes)
    notes = [line for line in lines if line.startswith(" " * narrow.INDENT)]
    assert notes and all(len(line) <= 80 for line in notes)
    assert any(len(line) > 70 for line in notes)  # filled up to the width, not one per line


def test_a_wide_terminal_still_gets_the_grid() -> None:
    outcomes, _ = matrix()
    outcomes = [o for o in outcomes if o.spec.scenario.name in NAMES[:4]]
    console = rich.console.Console(
        file=io.StringIO(), width=200, force_terminal=True, color_system=None
    )
    lines = render(console, outcomes)
    header = next(line for line in lines if line.startswith("┃ boundary "))
    assert [cell.strip() for cell in header.strip("┃ ").split("┃")] == ["boundary", *NAMES[:4]]
    assert all(row_of(lines, name) is None for name in NAMES[:4])  # no row per scenario


def test_a_terminal_too_narrow_for_the_grid_gets_rows() -> None:
    outcomes, expected = matrix()
    console = rich.console.Console(
        file=io.StringIO(), width=80, force_terminal=True, color_system=None
    )
    lines = render(console, outcomes)
    assert not any("…" in line for line in lines)
    for name, (worst, _) in expected.items():
        index = row_of(lines, name)
        assert index is not None and lines[index].startswith(worst.value + " "), name


def test_packed_lines_keep_each_item_whole_and_fit_the_width() -> None:
    items = [f"kill@tools.pending#{i}" for i in range(12)] + ["x" * 90, "y"]
    lines = [text.plain for text in narrow.packed("FAIL at", items, width=60)]
    assert lines[0].startswith("    FAIL at: kill@tools.pending#0,")
    assert all(len(line) <= 60 for line in lines if "x" * 90 not in line)
    assert [line.strip() for line in lines if "x" * 90 in line] == ["x" * 90 + ","]
    words = " ".join(lines).replace(",", " ").split()[3:]
    assert words == items[1:]  # every item once, in order, never split
