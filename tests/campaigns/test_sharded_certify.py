"""Two shards of a small certification run at once on this machine, merged: the same level
and the same per-invariant verdicts as one unsharded certification."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
# A broken engine, so that the level compared is not simply FULL.
ENGINE = str(ROOT / "tests" / "quality" / "engines" / "resend_reply.yaml")
SELECTION = ["--scenario", "refund", "--points", "tool.returned,reply.sending,reply.sent"]

pytestmark = [pytest.mark.matrix, pytest.mark.postgres]


def _certify(out: pathlib.Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CRASHCERT, "certify", "--engine", ENGINE, *SELECTION, "--jobs", "1", "--out", str(out),
         "--json", str(out / "certification.json"), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_two_certify_shards_merged_certify_like_one_run(tmp_path: pathlib.Path) -> None:
    whole = _certify(tmp_path / "whole")
    shards = [_certify(tmp_path / f"shard-{i}", "--shard", f"{i}/2") for i in (1, 2)]
    for process in [whole, *shards]:
        output, _ = process.communicate(timeout=900)
        assert process.returncode == 0, output
    merged_json = tmp_path / "merged.json"
    done = subprocess.run(
        [CRASHCERT, "merge", str(tmp_path / "shard-1"), str(tmp_path / "shard-2"),
         "--json", str(merged_json), "--require", "FULL"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # below FULL, as --require says
    assert "2 certify shards merged" in done.stdout
    unsharded = json.loads((tmp_path / "whole" / "certification.json").read_text())
    merged = json.loads(merged_json.read_text())
    assert merged["evidence_level"] == unsharded["evidence_level"] == "AT-LEAST-ONCE"
    assert merged["title"] == unsharded["title"]  # capped alike: kills at three points only
    assert merged["coverage"] == unsharded["coverage"]
    assert {i: v["verdict"] for i, v in merged["invariants"].items()} == {
        i: v["verdict"] for i, v in unsharded["invariants"].items()
    }
    assert merged["invariants"]["reply.single_delivery"]["verdict"] == "FAIL"
    assert [(t["label"], t["verdict"]) for t in merged["trials"]] == [
        (t["label"], t["verdict"]) for t in unsharded["trials"]
    ]
    # each shard ran the baseline and only its own fault trials
    ran = [
        t["label"]
        for i in (1, 2)
        for t in json.loads((tmp_path / f"shard-{i}" / "certification.json").read_text())["trials"]
        if t["plan"]
    ]
    assert sorted(ran) == sorted(t["label"] for t in unsharded["trials"] if t["plan"])
