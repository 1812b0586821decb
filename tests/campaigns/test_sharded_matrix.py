"""Shards of a crash matrix run at once on this machine, merged: the same verdict per trial as
one unsharded run, one JUnit case per trial, one HTML report."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
# A broken engine, so that the verdicts compared are not all PASS.
ENGINE = str(ROOT / "tests" / "quality" / "engines" / "resend_reply.yaml")
SELECTION = [
    "--scenario", "refund", "--scenario", "sink_no_query",
    "--points", "tool.returned,reply.sent",
]  # fmt: skip
SHARDS = 2

pytestmark = [pytest.mark.matrix, pytest.mark.postgres]


def _matrix(out: pathlib.Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            CRASHCERT,
            "matrix",
            "--engine",
            ENGINE,
            *SELECTION,
            "--jobs",
            "1",
            "--out",
            str(out),
            *extra,
            "--json",
            str(out / "report.json"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _verdicts(document: dict) -> dict[tuple[str, str], str]:
    verdicts = {(t["scenario"], t["label"]): t["verdict"] for t in document["trials"]}
    assert len(verdicts) == len(document["trials"])  # no trial twice
    return verdicts


def test_shards_merged_equal_one_unsharded_run(tmp_path):
    whole = _matrix(tmp_path / "whole")
    shards = [
        _matrix(tmp_path / f"shard-{i}", "--shard", f"{i}/{SHARDS}") for i in range(1, SHARDS + 1)
    ]
    for process in [whole, *shards]:
        output, _ = process.communicate(timeout=900)
        assert process.returncode in (0, 1), output
    # the shards' output as CI artifacts land: moved elsewhere than where they were written
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    for i in range(1, SHARDS + 1):
        (tmp_path / f"shard-{i}").rename(artifacts / f"shard-{i}")
    merged_json, junit = tmp_path / "merged.json", tmp_path / "merged.xml"
    done = subprocess.run(
        [
            CRASHCERT,
            "merge",
            str(artifacts),
            "--json",
            str(merged_json),
            "--junit",
            str(junit),
            "--out",
            str(tmp_path / "merged"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    unsharded = json.loads((tmp_path / "whole" / "report.json").read_text())
    merged = json.loads(merged_json.read_text())
    assert done.returncode == verdict_exit(unsharded["verdict"]), done.stdout + done.stderr
    assert merged["verdict"] == unsharded["verdict"] == "FAIL"
    assert _verdicts(merged) == _verdicts(unsharded)
    assert [t["label"] for t in merged["trials"]] == [t["label"] for t in unsharded["trials"]]
    assert len(merged["merged"]["shards"]) == SHARDS
    # each shard ran only its own fault trials (and every baseline)
    ran = [
        (t["scenario"], t["label"])
        for i in range(1, SHARDS + 1)
        for t in json.loads((artifacts / f"shard-{i}" / "report.json").read_text())["trials"]
        if t["plan"]
    ]
    assert sorted(ran) == sorted(
        (t["scenario"], t["label"]) for t in unsharded["trials"] if t["plan"]
    )
    # every trial directory found where the artifacts landed, and reported once
    assert all(pathlib.Path(t["directory"]).is_dir() for t in merged["trials"])
    cases = ET.parse(junit).getroot().iter("testcase")
    assert sum(1 for _ in cases) == len(unsharded["trials"])
    page = (tmp_path / "merged" / "report.html").read_text()
    assert f"{SHARDS} shards merged" in page
    # a shard from another plan is refused, though its number would complete the set
    other = tmp_path / "other"
    extra = _matrix(other, "--shard", "1/2", "--points", "reply.sent")
    extra.communicate(timeout=900)
    refused = subprocess.run(
        [CRASHCERT, "merge", str(artifacts / "shard-2"), str(other)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert refused.returncode == 3
    assert "another plan" in refused.stderr


def verdict_exit(verdict: str) -> int:
    return {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 2, "ERROR": 3}[verdict]
