"""`crashcert run` and `crashcert matrix` gate scenarios on capabilities as certify does
(harness/engines/capabilities.py): a scenario that needs what the engine does not offer is
not run and reported as such, with the capability named: INCONCLUSIVE, never FAIL. No
cluster starts for a scenario that cannot run."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import types

import pytest

from harness.campaigns import matrix
from harness.checkers import verdict as verdict_module
from harness.engines import commands
from harness.planning import shard
from harness.scenario import schema
from harness.shards import merge

CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
# An engine with no cancel, approve or purge command and tools over HTTP only; its commands
# are never started here (a gated scenario starts nothing).
ENGINE = "name: plain\nmigrate: [x]\nworker: [x]\nsubmit: [x]\nstatus: [x]\n"
INCONCLUSIVE = verdict_module.Verdict.INCONCLUSIVE


def _engine(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "plain.yaml"
    path.write_text(ENGINE)
    return path


def _crashcert(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRASHCERT, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.processes  # a crashcert process: the flake hunt runs it
def test_run_does_not_run_a_scenario_needing_a_missing_capability(tmp_path: pathlib.Path) -> None:
    engine = str(_engine(tmp_path))
    done = _crashcert("run", "--engine", engine, "--scenario", "cancel_in_flight", cwd=tmp_path)
    assert done.returncode == INCONCLUSIVE.exit_code, done.stdout + done.stderr
    assert "cancel_in_flight not run: it needs cancel," in done.stdout
    assert "cancelling a run in flight" in done.stdout  # what it leaves unproven
    assert "FAIL" not in done.stdout and "Traceback" not in done.stderr
    assert "toxiproxy" not in done.stdout  # no lab was opened
    mcp = _crashcert("run", "--engine", engine, "--scenario", "refund_mcp", cwd=tmp_path)
    assert mcp.returncode == INCONCLUSIVE.exit_code
    assert "it needs mcp," in mcp.stdout


@pytest.mark.processes  # a crashcert process: the flake hunt runs it
def test_matrix_of_gated_scenarios_runs_nothing_and_names_each(tmp_path: pathlib.Path) -> None:
    engine = str(_engine(tmp_path))
    report = tmp_path / "m.json"
    done = _crashcert(
        "matrix", "--engine", engine, "--scenario", "cancel_in_flight",
        "--scenario", "approval_approved", "--json", str(report), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == INCONCLUSIVE.exit_code, done.stdout + done.stderr
    document = json.loads(report.read_text())
    assert document["verdict"] == "INCONCLUSIVE"
    assert document["trials"] == []
    assert document["not_run"] == {"cancel_in_flight": ["cancel"], "approval_approved": ["approve"]}
    assert "cancel_in_flight not run: needs cancel" in done.stdout
    assert "FAIL" not in done.stdout


def test_run_matrix_gates_before_any_trial(tmp_path: pathlib.Path) -> None:
    """The library entry as the CLI: a gated scenario never reaches run_trial (the stand-in
    lab has nothing to run one with), and the matrix cannot vouch for it."""
    lab = types.SimpleNamespace(engine=commands.load(_engine(tmp_path)))
    names = ["refund_mcp", "dbos_py_769_reused_key_replays_purged_run"]
    result = matrix.run_matrix(
        lab,  # type: ignore[arg-type]
        [(name, schema.find(name)) for name in names],
        out_dir=tmp_path / "out",
        engine_ref="plain",
    )
    assert result.outcomes == []
    assert result.not_run == {names[0]: ["mcp"], names[1]: ["purge"]}
    assert result.verdict is INCONCLUSIVE


def test_a_merge_of_matrix_shards_keeps_what_was_not_run(tmp_path: pathlib.Path) -> None:
    planned = [("refund", "baseline")]
    trial = {
        "scenario": "refund", "label": "baseline", "plan": [], "verdict": "PASS",
        "duration_s": 0.5, "directory": "/runner/out/refund", "repro": "crashcert run",
        "invariants": [],
    }  # fmt: skip
    directories = []
    for index in (1, 2):
        meta = {
            **shard.record(shard.Shard(index, 2), engine="plain", seed=0, planned=planned),
            "out_dir": "/runner/out",
        }
        document = {
            "verdict": "INCONCLUSIVE", "trials": [trial], "unreached": [], "wall_s": 1.0,
            "not_run": {"cancel_in_flight": ["cancel"]}, "shard": meta,
        }  # fmt: skip
        directory = tmp_path / f"shard-{index}"
        directory.mkdir()
        (directory / shard.RECORD).write_text(json.dumps(document))
        directories.append(directory)
    merged = merge.merge(merge.find(directories))
    assert merged["not_run"] == {"cancel_in_flight": ["cancel"]}
    assert merged["verdict"] == "INCONCLUSIVE"  # every trial passed, one scenario never ran
