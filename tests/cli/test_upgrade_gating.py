"""`upgrade:` in an engine description (its next version) and the gate on it: an engine that
names no next version is not planned the `upgrade` fault class by `run`, `matrix`, `certify`
or `explore`; what was not run is named, INCONCLUSIVE, never FAIL."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import types

import pytest

from harness import errors
from harness.campaigns import certify, matrix
from harness.checkers import verdict as verdict_module
from harness.engines import capabilities, commands
from harness.scenario import schema
from tests.quality import test_broken_engines as broken

CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
BASE = "name: e\nmigrate: [x]\nworker: [x]\nsubmit: [x]\nstatus: [x]\nenv: {A: '1', B: '1'}\n"
INCONCLUSIVE = verdict_module.Verdict.INCONCLUSIVE


def _engine(tmp_path: pathlib.Path, extra: str = "") -> commands.CommandEngine:
    path = tmp_path / "e.yaml"
    path.write_text(BASE + extra)
    return commands.load(path)


def test_a_next_version_is_offered_with_its_worker_and_environment(
    tmp_path: pathlib.Path,
) -> None:
    plain = _engine(tmp_path)
    assert "upgrade" not in (capabilities.offered(plain) or set())
    assert plain.upgrade_worker_command() is None
    assert plain.upgrade_migrate("postgresql://unused") is False  # nothing to run
    upgraded = _engine(tmp_path, "upgrade: {worker: ['{python}', w2], env: {B: '2', C: '2'}}\n")
    assert "upgrade" in (capabilities.offered(upgraded) or set())
    assert upgraded.upgrade_worker_command() == [sys.executable, "w2"]
    assert upgraded.upgrade_worker_env() == {"A": "1", "B": "2", "C": "2"}
    assert "upgrade" in (capabilities.offered(commands.find("reference")) or set())


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("upgrade: {}\n", "worker"),
        ("upgrade: {worker: []}\n", "worker"),
        ("upgrade: {worker: [x], restart: true}\n", "restart"),
        ("upgrade: {worker: ['{run_id}']}\n", "unknown placeholder"),
        ("upgrade: {worker: [x], migrate: ['{tool_call_id}']}\n", "unknown placeholder"),
    ],
)
def test_a_bad_next_version_is_refused_naming_it(
    tmp_path: pathlib.Path, extra: str, says: str
) -> None:
    with pytest.raises(errors.CrashcertError, match=says):
        _engine(tmp_path, extra)


def test_only_the_classes_needing_what_is_not_offered_are_held_back() -> None:
    assert capabilities.missing_for_faults(["kill", "upgrade"], frozenset({"http"})) == ["upgrade"]
    assert capabilities.missing_for_faults(["kill", "upgrade"], frozenset({"upgrade"})) == []
    assert capabilities.missing_for_faults(["upgrade"], None) == []  # cannot say: planned


def _crashcert(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRASHCERT, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.processes  # a crashcert process: the flake hunt runs it
def test_run_and_explore_do_not_upgrade_an_engine_without_a_next_version(
    tmp_path: pathlib.Path,
) -> None:
    engine = str(tmp_path / "e.yaml")
    _engine(tmp_path)
    fault = "upgrade@tool.returned#1"
    done = _crashcert(
        "run", "--engine", engine, "--scenario", "refund", "--fault", fault, cwd=tmp_path
    )
    assert done.returncode == INCONCLUSIVE.exit_code, done.stdout + done.stderr
    assert "refund not run: its faults (upgrade) need upgrade" in " ".join(done.stdout.split())
    assert "FAIL" not in done.stdout and "toxiproxy" not in done.stdout  # no lab opened
    explored = _crashcert(
        "explore", "--engine", engine, "--scenario", "refund", "--faults", "upgrade", cwd=tmp_path
    )
    assert explored.returncode == INCONCLUSIVE.exit_code, explored.stdout + explored.stderr
    assert "toxiproxy" not in explored.stdout and "Traceback" not in explored.stderr


@pytest.mark.processes
@pytest.mark.postgres  # the matrix runs the baseline: only the upgrade trials are held back
def test_matrix_runs_the_baseline_and_names_the_upgrade_trials_not_run(
    tmp_path: pathlib.Path,
) -> None:
    engine = str(broken.ENGINES / "ignore_fingerprint.yaml")  # no `upgrade:`
    report = tmp_path / "m.json"
    done = _crashcert(
        "matrix", "--engine", engine, "--scenario", "refund", "--faults", "upgrade",
        "--json", str(report), "--out", str(tmp_path / "out"), cwd=broken.REPO,
    )  # fmt: skip
    assert done.returncode == INCONCLUSIVE.exit_code, done.stdout + done.stderr
    document = json.loads(report.read_text())
    assert document["not_run"] == {"refund under upgrade": ["upgrade"]}
    assert [(t["label"], t["verdict"]) for t in document["trials"]] == [("baseline", "PASS")]
    assert "refund under upgrade not run: needs upgrade" in done.stdout


def test_certify_names_the_upgrade_trials_the_engine_could_not_take(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the matrix held back is listed as not offered, with what it leaves unproven."""

    def held_back(lab: object, scenarios: list[object], **_: object) -> matrix.MatrixResult:
        return matrix.MatrixResult(not_run={"refund under upgrade": ["upgrade"]})

    monkeypatch.setattr(certify.matrix_module, "run_matrix", held_back)
    lab = types.SimpleNamespace(engine=_engine(tmp_path))
    cert = certify.certify(
        lab,  # type: ignore[arg-type]
        [("refund", schema.find("refund"))],
        out_dir=tmp_path,
        engine_ref="e",
        mode="boundary",
        faults=["upgrade"],
    )
    assert cert.not_offered == {"upgrade": ["refund under upgrade"]}
    assert any(
        line.startswith("not offered: upgrade (refund under upgrade not run)")
        and "next version" in line
        for line in certify.coverage_lines(cert)
    )
