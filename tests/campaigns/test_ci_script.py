"""ci/crashcert-ci.sh, the script teams copy: exit code, JUnit, JSON, failed trials kept."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "crashcert-ci.sh"

pytestmark = [pytest.mark.matrix, pytest.mark.postgres]


def _run(out: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CRASHCERT_OUT=str(out))
    env["CRASHCERT"] = str(pathlib.Path(sys.executable).parent / "crashcert")
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_broken_engine_fails_and_its_trials_are_kept(tmp_path):
    done = _run(
        tmp_path,
        "tests/contract/naive_engine.yaml",
        "--scenario",
        "refund",
        "--points",
        "tool.returned",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    failing = [t for t in report["trials"] if t["verdict"] == "FAIL"]
    assert any("kill@tool.returned#2" in t["label"] for t in failing)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    kept = list((tmp_path / "failed" / "refund").iterdir())
    assert kept and all((d / "repro.txt").exists() for d in kept)
    # the rerun line names the engine file absolutely: it reruns from any directory
    engine = ROOT / "tests" / "contract" / "naive_engine.yaml"
    assert f"crashcert run --engine {engine} " in done.stdout


def test_the_reference_engine_passes(tmp_path):
    done = _run(
        tmp_path, "reference", "--scenario", "sink_no_query", "--points", "reply.sending,reply.sent"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "PASS"
    labels = {t["label"] for t in report["trials"]}
    assert {"baseline", "kill@reply.sending#1", "kill@reply.sent#1"} <= labels
    assert not (tmp_path / "failed").exists()
