"""The boundary x scenario grid: the terminal table and the HTML matrix page have the same rows,
black-box points (world:..., time:...) included, and put each trial in the same row."""

from __future__ import annotations

import io
import pathlib

import rich.console

from harness.checkers import verdict
from harness.faults import spec as fault_spec
from harness.planning import plan
from harness.record import history
from harness.report import summary, timeline
from harness.scenario import schema as scenario
from harness.trial import runner
from tests.report.timeline import chromium

REFUND = scenario.find("refund")
V = verdict.Verdict
TRIALS = [
    (None, V.PASS),
    ("kill@world:tool.effect#1", V.FAIL),
    ("kill@time:+1.5s", V.INCONCLUSIVE),
    ("kill@time:+0.3s", V.PASS),
    ("kill@tools.pending:before_commit#1", V.ERROR),
]
EXPECTED = {
    "baseline": "PASS",
    "world:tool.effect": "FAIL",
    "time:+Ns": "INCONCLUSIVE PASS",  # every moment a time kill was drawn at shares one row
    "tools.pending": "ERROR",  # a :before_commit twin shares its boundary's row
}


def outcome(index: int, fault: str | None, result: verdict.Verdict) -> runner.TrialOutcome:
    steps = [fault_spec.parse(fault)] if fault else []
    label = plan.plan_label(steps) or "baseline"
    spec = runner.TrialSpec(scenario=REFUND, plan=steps, label=label)
    recorded = history.TrialHistory(
        trial_id=f"t-{index}", engine="e", scenario=REFUND, run_key="k", plan=steps
    )
    return runner.TrialOutcome(
        spec=spec,
        history=recorded,
        results=[],
        verdict=result,
        directory=pathlib.Path(f"/nonexistent/t-{index}"),
        repro="crashcert run ...",
    )


def outcomes() -> list[runner.TrialOutcome]:
    return [outcome(i, fault, result) for i, (fault, result) in enumerate(TRIALS)]


def terminal_rows() -> dict[str, str]:
    """Each row's name and cell text of the terminal table (one scenario: one cell)."""
    console = rich.console.Console(
        file=io.StringIO(), width=200, force_terminal=True, color_system=None
    )
    summary.print_summary(outcomes(), console=console)
    rows = {}
    for line in console.file.getvalue().splitlines():  # type: ignore[attr-defined]
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) == 2 and cells[0] and cells[0] != "boundary":
            rows[cells[0]] = cells[1]
    return rows


def html_rows() -> dict[str, str]:
    """Each row's name and the verdicts of its cell's trial links in the HTML grid."""
    page = timeline.matrix_page([timeline.view_of_outcome(o) for o in outcomes()])
    [grid] = chromium.parse(page).find("table", "matrix")
    rows = {}
    for row in grid.find("tr"):
        cells = row.find("td", "cell", data_scenario="refund")
        if not cells:
            continue  # the header row
        [head] = row.find("th")
        [cell] = cells
        assert cell.attrs["data-point"] == head.all_text()
        links = cell.find("a", "trial-link")
        rows[head.all_text()] = " ".join(
            sorted({link.attrs["title"].split(": ")[-1] for link in links})
        )
    return rows


def test_black_box_trials_are_in_the_terminal_table_and_the_html_grid() -> None:
    letters = {
        name: " ".join(v[0] for v in verdicts.split()) for name, verdicts in EXPECTED.items()
    }
    terminal = terminal_rows()
    for name, cell in letters.items():
        assert [part[0] for part in terminal[name].split()] == cell.split(), name
    grid = html_rows()
    for name, verdicts in EXPECTED.items():
        assert grid[name] == " ".join(sorted(verdicts.split())), name


def test_both_show_the_same_rows_in_the_same_order() -> None:
    terminal = list(terminal_rows())
    assert terminal[-2:] == ["world:tool.effect", "time:+Ns"]  # after every boundary
    assert list(html_rows()) == terminal
