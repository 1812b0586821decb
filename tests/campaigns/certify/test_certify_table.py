"""The dated certification table: one row per mode, each mode's level from its own trials,
with the framework the description names and what kept each level from holding."""

from __future__ import annotations

import pathlib

from harness.campaigns import certify
from harness.checkers import judge, levels
from harness.engines import commands
from harness.faults import spec as fault_spec
from harness.record import history
from harness.report import certify_table
from harness.trial import runner
from tests.checkers import builders

KILL = fault_spec.FaultStep(action="kill", point="world:tool.effect", occurrence=1)


def _outcome(trial: history.TrialHistory) -> runner.TrialOutcome:
    results, verdict = judge.judge(trial)
    spec = runner.TrialSpec(scenario=trial.scenario, plan=trial.plan, label="x")
    return runner.TrialOutcome(
        spec=spec, history=trial, results=results, verdict=verdict,
        directory=pathlib.Path("/nonexistent"), repro="crashcert run ...",
    )  # fmt: skip


def _certificate() -> certify.Certification:
    clean = _outcome(builders.clean())
    # a black-box kill that never struck: every invariant it would have tested is unshown
    unstruck = _outcome(builders.clean().model_copy(update={"plan": [KILL]}))
    return certify.Certification(
        engine="lg_naive", engine_ref="lg.yaml", modes=["boundary", "blackbox"],
        trials=[certify.CertTrial("boundary", clean), certify.CertTrial("blackbox", clean),
                certify.CertTrial("blackbox", unstruck)],
        framework="LangGraph", framework_version="1.2.3", date="2026-12-01",
    )  # fmt: skip


def test_one_row_per_mode_with_its_own_level() -> None:
    cert = _certificate()
    boundary, blackbox = certify_table.rows(cert)
    boundary_alone = certify.Certification(
        engine="e", engine_ref="e", modes=["boundary"], trials=cert.trials[:1]
    )
    # a baseline alone ran no fault: the level says what is missing (its frontier is only
    # the hits' own detail.frontier_version: self-reported, so FULL was never in reach)
    assert boundary_alone.evidence_level.value == "CRASH-SAFE"
    assert boundary_alone.title == "NONE (CRASH-SAFE needs kill, submit_twice not run)"
    assert boundary.startswith(
        f"| LangGraph | 1.2.3 | lg_naive | boundary | {certify_table._cell(boundary_alone.title)} "
        "| - | - | 0/"
    )
    assert blackbox.startswith("| LangGraph | 1.2.3 | lg_naive | blackbox | NONE | - | kill | 0/")
    # the unstruck kill shows nothing: its invariants are named with the reason
    assert "`tool.at_most_once` INCONCLUSIVE" in blackbox
    assert blackbox.endswith(f"| 2026-12-01 | {certify_table.installed('crashcert')} |")
    markdown = certify.to_markdown(cert)
    assert certify_table.HEADER in markdown and blackbox in markdown


def test_each_row_names_the_fault_classes_its_level_rests_on() -> None:
    # the header's sixth column is what the level promises to survive, not what happened
    # to run: an AT-LEAST-ONCE row rests on kill alone, a CRASH-SAFE one on kill and
    # submit_twice, FULL on every class a level can ask for, NONE on nothing
    assert certify_table.HEADER.split(" | ")[5] == "level rests on"
    assert certify_table.rests_on(levels.Level.AT_LEAST_ONCE) == "kill"
    assert certify_table.rests_on(levels.Level.CRASH_SAFE) == "kill, submit_twice"
    assert certify_table.rests_on(levels.Level.FULL) == ", ".join(levels.REQUIRED_CLASSES)
    assert certify_table.rests_on(levels.Level.NONE) == "-"
    header_cells = certify_table.HEADER.splitlines()[0].count("|")
    for row in certify_table.rows(_certificate()):
        assert row.count("|") - row.count("\\|") == header_cells


def test_a_cell_never_breaks_the_table() -> None:
    text = "a | b\nc " + "x" * 500
    cell = certify_table._cell(text)
    assert "\n" not in cell and "a \\| b c" in cell
    assert len(cell) == certify_table.WHY_CHARS


def test_framework_and_version_come_from_the_description(tmp_path: pathlib.Path) -> None:
    description = tmp_path / "e.yaml"
    description.write_text(
        "name: e\nmigrate: [x]\nworker: [x]\nsubmit: [x]\nstatus: [x]\n"
        "framework: {name: Pydantic, package: pydantic}\n"
    )
    engine = commands.load(description)
    name, version = certify_table.framework_of(engine)
    # the worker command `x` is no Python: the version cannot be asked of it
    assert name == "Pydantic" and version.startswith("unknown (the worker command names no")
    assert certify_table.installed("no-such-distribution-crashcert") == "not installed"
    assert certify_table.framework_of(object()) == ("", "")


def _engine(tmp_path: pathlib.Path, worker: str, framework: str) -> commands.CommandEngine:
    description = tmp_path / "e.yaml"
    description.write_text(
        f"name: e\nmigrate: [x]\nworker: {worker}\nsubmit: [x]\nstatus: [x]\n"
        f"env: {{FRAMEWORK_VERSION: 0.24.0}}\nframework: {framework}\n"
    )
    return commands.load(description)


def test_the_version_is_the_engines_interpreters_not_the_harnesss(tmp_path: pathlib.Path) -> None:
    # An engine in its own virtualenv: its python has a package the harness's env lacks.
    venv_python = tmp_path / "venv" / "bin" / "python3"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text('#!/bin/sh\necho "$FRAMEWORK_VERSION"\n')  # the env is the engine's
    venv_python.chmod(0o755)
    framework = "{name: OpenAI Agents SDK, package: no-such-distribution-crashcert}"
    engine = _engine(tmp_path, f"[{venv_python}, -m, agent]", framework)
    assert certify_table.installed("no-such-distribution-crashcert") == "not installed"
    assert certify_table.framework_of(engine) == ("OpenAI Agents SDK", "0.24.0")


def test_the_worker_python_is_asked_and_a_missing_package_says_so(tmp_path: pathlib.Path) -> None:
    engine = _engine(tmp_path, "['{python}', -m, agent]", "{name: P, package: pydantic}")
    assert certify_table.framework_of(engine)[1][0].isdigit()
    missing = _engine(tmp_path, "['{python}', -m, a]", "{name: N, package: no-such-dist-cc}")
    assert certify_table.framework_of(missing) == ("N", "not installed")
    # the packages its behaviour also rests on (its model client), each asked of the same Python
    also = _engine(
        tmp_path,
        "['{python}', -m, a]",
        "{name: P, package: pydantic, also: [pytest, no-such-dist-cc]}",
    )
    version = certify_table.framework_of(also)[1]
    assert version.startswith(certify_table.installed("pydantic") + " (pytest ")
    assert version.endswith(", no-such-dist-cc not installed)")
    command = "{name: V, package: v, version: [sh, -c, 'echo 1.2.3']}"
    assert certify_table.framework_of(_engine(tmp_path, "[x]", command)) == ("V", "1.2.3")
