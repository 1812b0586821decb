"""Reports of a set of trials: terminal table, JSON, JUnit XML. Every failure one line to rerun."""

from __future__ import annotations

import collections
import json
import pathlib
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

import rich.console
import rich.table

from harness.checkers import verdict as verdict_module
from harness.report import grid, narrow, terminal
from harness.trial import runner

STYLE = terminal.STYLE
ROWS_TITLE = "scenario: trials per verdict (P pass, F fail, I inconclusive, E error)"


def print_summary(
    outcomes: list[runner.TrialOutcome],
    *,
    console: rich.console.Console,
    unreached: list[str] | None = None,
    not_run: dict[str, list[str]] | None = None,
) -> None:
    cells: dict[tuple[str, str], list[verdict_module.Verdict]] = collections.defaultdict(list)
    scenarios: list[str] = []
    for outcome in outcomes:
        name = outcome.spec.scenario.name
        if name not in scenarios:
            scenarios.append(name)
        cells[(name, grid.row_of(outcome.spec.plan))].append(outcome.verdict)
    rows = grid.rows(point for _, point in cells)
    table = rich.table.Table(title="boundary x scenario: trials per verdict (P pass, F fail, ...)")
    table.add_column("boundary")
    for name in scenarios:
        table.add_column(name, justify="center")
    for row in rows:
        table.add_row(row, *[terminal.counts(cells.get((name, row), [])) for name in scenarios])
    if narrow.grid_fits(console, table):
        console.print(table)
    else:
        trials = ((o.spec.scenario.name, o.spec.label, o.verdict) for o in outcomes)
        narrow.print_rows(console, ROWS_TITLE, scenario_rows(trials))
    for outcome in outcomes:
        if outcome.verdict is not verdict_module.Verdict.PASS:
            failing = ", ".join(f"{r.invariant}={r.verdict.value}" for r in outcome.failing)
            console.print(
                terminal.line(
                    terminal.verdict(outcome.verdict),
                    f" {outcome.spec.scenario.name} {outcome.spec.label}: {failing}\n"
                    f"  rerun: {outcome.repro}\n  trial: {outcome.directory}",
                )
            )
    if unreached:
        console.print(
            terminal.line(
                terminal.verdict(verdict_module.Verdict.INCONCLUSIVE),
                f" declared but never reached by any scenario: {', '.join(unreached)}",
            )
        )
    for line in not_run_lines(not_run or {}):
        console.print(terminal.line(terminal.verdict(verdict_module.Verdict.INCONCLUSIVE), line))


def not_run_lines(not_run: dict[str, list[str]]) -> list[str]:
    """A line per scenario not run for a capability the engine does not offer."""
    return [
        f" {name} not run: needs {', '.join(lacking)}, which the engine does not offer"
        for name, lacking in not_run.items()
    ]


def scenario_rows(trials: Iterable[tuple[str, str, verdict_module.Verdict]]) -> list[narrow.Row]:
    """A row per scenario of (scenario, label, verdict) trials, in the order first met,
    naming its trials that did not pass."""
    by_scenario: dict[str, list[tuple[str, verdict_module.Verdict]]] = {}
    for scenario, label, value in trials:
        by_scenario.setdefault(scenario, []).append((label, value))
    rows = []
    for name, labelled in by_scenario.items():
        verdicts = [value for _, value in labelled]
        notes = [
            (terminal.verdict(value, f"{value.value} at"), labels)
            for value in verdict_module.SEVERITY
            if value is not verdict_module.Verdict.PASS
            if (labels := [label for label, seen in labelled if seen is value])
        ]
        rows.append(
            narrow.Row(name, verdict_module.worst(verdicts), terminal.counts(verdicts), notes)
        )
    return rows


def outcome_json(outcome: runner.TrialOutcome) -> dict[str, Any]:
    return {
        "scenario": outcome.spec.scenario.name,
        "label": outcome.spec.label,
        "plan": [step.label() for step in outcome.spec.plan],
        "verdict": outcome.verdict.value,
        "duration_s": round(outcome.history.ended_at - outcome.history.started_at, 3),
        "directory": str(outcome.directory),
        "repro": outcome.repro,
        "invariants": [result.model_dump(mode="json") for result in outcome.results],
    }


def write_json(
    path: pathlib.Path,
    outcomes: list[runner.TrialOutcome],
    *,
    verdict: verdict_module.Verdict,
    unreached: list[str],
    wall_s: float,
    shard: dict[str, Any] | None = None,
    not_run: dict[str, list[str]] | None = None,
) -> None:
    document: dict[str, Any] = {
        "verdict": verdict.value,
        "trials": [outcome_json(outcome) for outcome in outcomes],
        "unreached": unreached,
        "not_run": not_run or {},
        "wall_s": round(wall_s, 3),
    }
    if shard is not None:  # what `crashcert merge` checks and orders the shards by
        document["shard"] = shard
    path.write_text(json.dumps(document, indent=2) + "\n")


def write_junit(path: pathlib.Path, outcomes: list[runner.TrialOutcome]) -> None:
    write_junit_records(path, [outcome_json(outcome) for outcome in outcomes])


def write_junit_records(path: pathlib.Path, trials: list[dict[str, Any]]) -> None:
    """JUnit XML of trials as the JSON report records them (a merge has no outcomes)."""
    by_scenario: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for trial in trials:
        by_scenario[trial["scenario"]].append(trial)
    suites = ET.Element("testsuites", name="crashcert")
    for name, items in by_scenario.items():
        suite = ET.SubElement(suites, "testsuite", name=f"crashcert.{name}", tests=str(len(items)))
        failures = errors = skipped = 0
        for trial in items:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"crashcert.{name}",
                name=trial["label"],
                time=f"{trial['duration_s']:.3f}",
            )
            failing = [r for r in trial["invariants"] if r["verdict"] != "PASS"]
            text = "\n".join(
                [f"rerun: {trial['repro']}", f"trial: {trial['directory']}"]
                + [
                    f"{r['invariant']} {r['verdict']}: {r['summary']}\n    "
                    + "\n    ".join(r["evidence"])
                    for r in failing
                ]
            )
            verdict = verdict_module.Verdict(trial["verdict"])
            if verdict is verdict_module.Verdict.FAIL:
                failures += 1
                ET.SubElement(case, "failure", message=_first_failure(trial)).text = text
            elif verdict is verdict_module.Verdict.ERROR:
                errors += 1
                ET.SubElement(case, "error", message=_first_failure(trial)).text = text
            elif verdict is verdict_module.Verdict.INCONCLUSIVE:
                skipped += 1
                ET.SubElement(case, "skipped", message=_first_failure(trial)).text = text
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    ET.ElementTree(suites).write(path, encoding="unicode", xml_declaration=True)


def _first_failure(trial: dict[str, Any]) -> str:
    """The result that decided the trial's verdict (a FAIL before an INCONCLUSIVE)."""
    for result in trial["invariants"]:
        if result["verdict"] == trial["verdict"]:
            return f"{result['invariant']}: {result['summary']}"
    return str(trial["verdict"])
