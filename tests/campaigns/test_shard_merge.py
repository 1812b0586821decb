"""Shards of a crash matrix: the split is a function of trial names; a merge refuses mixtures."""

from __future__ import annotations

import json
import pathlib

import pytest

from harness import errors
from harness.planning import shard
from harness.shards import merge

LABELS = [("refund", "baseline")] + [("refund", f"kill@tool.started#{n}") for n in range(1, 40)]


def test_parse_accepts_i_of_n_and_refuses_the_rest():
    assert shard.parse("2/4") == shard.Shard(2, 4)
    for text in ("0/4", "5/4", "2", "a/b", "2/0"):
        with pytest.raises(errors.CrashcertError):
            shard.parse(text)


def test_every_trial_belongs_to_exactly_one_shard_by_its_name_not_its_position():
    for count in (1, 2, 3, 4):
        owners = [shard.owner(s, label, count) for s, label in LABELS]
        assert all(1 <= o <= count for o in owners)
        reversed_owners = [shard.owner(s, label, count) for s, label in reversed(LABELS)]
        assert owners == list(reversed(reversed_owners))
    # sha256 of the name: the same on every machine and Python (no hash randomisation)
    assert shard.owner("refund", "kill@tool.started#1", 4) == _expected_owner()
    assert len({shard.owner(s, label, 4) for s, label in LABELS}) == 4  # it does split


def _expected_owner() -> int:
    import hashlib

    digest = hashlib.sha256(b"refund\nkill@tool.started#1").digest()
    return int.from_bytes(digest[:8], "big") % 4 + 1


def _trial(scenario: str, label: str, verdict: str = "PASS", directory: str = "") -> dict:
    return {
        "scenario": scenario,
        "label": label,
        "plan": [] if label == "baseline" else [label],
        "verdict": verdict,
        "duration_s": 0.5,
        "directory": directory or f"/runner/out/{scenario}/{label}",
        "repro": f"crashcert run --scenario {scenario}",
        "invariants": [{"invariant": "x", "verdict": verdict, "summary": "s", "evidence": []}],
    }


def _write_shards(
    tmp_path: pathlib.Path, count: int, override: dict[int, dict] | None = None
) -> list[pathlib.Path]:
    paths = []
    for index in range(1, count + 1):
        meta = {
            **shard.record(shard.Shard(index, count), engine="reference", seed=0, planned=LABELS),
            "out_dir": "/runner/out",
        }
        meta.update((override or {}).get(index, {}))
        mine = [
            _trial(s, label, "FAIL" if label.endswith("#7") else "PASS")
            for s, label in LABELS
            if label == "baseline" or shard.owner(s, label, count) == index
        ]
        verdicts = {t["verdict"] for t in mine}
        document = {
            "verdict": "FAIL" if "FAIL" in verdicts else "PASS",
            "trials": mine,
            "unreached": [],
            "wall_s": float(index),
            "shard": meta,
        }
        directory = tmp_path / f"shard-{index}"
        directory.mkdir()
        (directory / shard.RECORD).write_text(json.dumps(document))
        paths.append(directory)
    return paths


def test_a_merge_has_every_trial_once_in_plan_order_and_the_worst_verdict(tmp_path):
    merged = merge.merge(merge.find(_write_shards(tmp_path, 3)))
    assert [(t["scenario"], t["label"]) for t in merged["trials"]] == LABELS  # baseline once
    assert merged["verdict"] == "FAIL"
    assert merged["wall_s"] == 3.0
    # a trial's directory is where this machine holds the shard's output
    seven = next(t for t in merged["trials"] if t["label"].endswith("#7"))
    index = shard.owner("refund", seven["label"], 3)
    assert seven["directory"] == str(tmp_path / f"shard-{index}" / "refund" / seven["label"])


def test_a_baseline_counts_once_with_its_worst_verdict(tmp_path):
    paths = _write_shards(tmp_path, 2)
    record = paths[1] / shard.RECORD
    document = json.loads(record.read_text())
    document["trials"][0]["verdict"] = "ERROR"
    record.write_text(json.dumps(document))
    merged = merge.merge(merge.find(paths))
    baselines = [t for t in merged["trials"] if t["label"] == "baseline"]
    assert [t["verdict"] for t in baselines] == ["ERROR"]
    assert merged["verdict"] == "FAIL"  # a FAIL still outranks an ERROR


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({2: {"fingerprint": "0123456789abcdef"}}, "another plan"),
        ({2: {"crashcert": {"version": "9.9", "revision": None}}}, "made by crashcert"),
        ({2: {"index": 1}}, "given twice"),
    ],
)
def test_a_merge_refuses_mixed_shards(tmp_path, override, words):
    with pytest.raises(errors.CrashcertError, match=words):
        merge.merge(merge.find(_write_shards(tmp_path, 3, override)))


def test_a_merge_refuses_a_missing_shard(tmp_path):
    paths = _write_shards(tmp_path, 3)
    with pytest.raises(errors.CrashcertError, match="shard 2/3 missing"):
        merge.merge(merge.find([paths[0], paths[2]]))


def test_a_merge_refuses_a_directory_without_shards(tmp_path):
    with pytest.raises(errors.CrashcertError, match=r"no shard\.json"):
        merge.find([tmp_path])
