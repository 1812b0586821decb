"""Merging certify shards: the level comes from the merged trials by certify's own rules,
whatever each shard's own level; baselines count once; refusals of what would lie."""

from __future__ import annotations

import json
import pathlib

import pytest

from harness import checkers, errors
from harness.campaigns import certify
from harness.checkers import levels
from harness.planning import shard
from harness.shards import merge, merge_certify
from tests.campaigns import recorded_checks

REPLY = "reply.single_delivery"
KILLS = [f"kill@reply.sending#{n}" for n in range(1, 7)]
PLANNED = [
    ("boundary", "refund", "baseline"),
    *[("boundary", "refund", label) for label in KILLS],
    ("blackbox", "refund", "baseline"),
    ("blackbox", "refund", certify.TIME_KILLS),
]
BROKEN = "kill@reply.sending#4"  # only this trial fails reply.single_delivery
# What the baselines offered the levels: every kill, and one pause that no shard ran.
REQUIRED = [
    *({"mode": "boundary", "scenario": "refund", "fault": "kill", "label": k} for k in KILLS),
    {"mode": "boundary", "scenario": "refund", "fault": "pause", "label": "pause@run.claimed#1"},
]


def _record(mode: str, label: str, *, failing: str | None = None, struck: bool = True) -> dict:
    results = [
        {
            "invariant": name,
            "verdict": "FAIL" if name == failing else "PASS",
            **recorded_checks.fields(name),
        }
        for name in checkers.INVARIANTS
    ]
    plan = [] if label == "baseline" else [label]
    if plan:
        applied = "PASS" if struck else "INCONCLUSIVE"
        results.append({"invariant": "plan.applied", "verdict": applied, "summary": "s"})
    where = "time" if "time:" in label else "boundary"
    return {
        "mode": mode,
        "fault_class": "baseline" if not plan else f"kill@{where}",
        "scenario": "refund",
        "label": label,
        "plan": plan,
        "verdict": "FAIL" if failing else "PASS",
        "duration_s": 0.5,
        "directory": f"/runner/out/{mode}/refund/{label}",
        "repro": f"crashcert run --scenario refund --fault {label}",
        "invariants": results,
    }


def _owner(mode: str, label: str, count: int) -> int:
    return shard.owner("refund", label, count)


def _write(tmp_path: pathlib.Path, count: int, *, kind: str = shard.CERTIFY) -> list[pathlib.Path]:
    paths = []
    for index in range(1, count + 1):
        trials = [_record("boundary", "baseline"), _record("blackbox", "baseline")]
        for label in KILLS:
            if _owner("boundary", label, count) == index:
                failing = REPLY if label == BROKEN else None
                trials.append(_record("boundary", label, failing=failing))
        if _owner("blackbox", certify.TIME_KILLS, count) == index:
            trials += [
                _record("blackbox", "kill@time:+0.31s"),
                _record("blackbox", "kill@time:+0.9s"),
            ]
        meta = shard.record(
            shard.Shard(index, count), engine="e", seed=0, planned=PLANNED, kind=kind
        )
        document = {
            "engine": "e",
            "engine_ref": "e.yaml",
            "modes": ["boundary", "blackbox"],
            "level": "whatever this shard earned alone",
            "trials": trials,
            "unreached": [],
            "required": REQUIRED,
            "wall_s": float(index),
            "shard": {**meta, "out_dir": "/runner/out"},
        }
        directory = tmp_path / f"shard-{index}"
        directory.mkdir(parents=True)
        (directory / shard.RECORD).write_text(json.dumps(document))
        paths.append(directory)
    return paths


def test_the_level_is_computed_from_the_merged_trials(tmp_path: pathlib.Path) -> None:
    cert = merge_certify.combine(merge.find(_write(tmp_path, 3)))
    assert len(cert.trials) == len(PLANNED) - 1 + 2  # time kills: two trials for one item
    assert [t.label for t in cert.trials][:2] == ["baseline", KILLS[0]]  # the plan's order
    assert cert.verdict_of(REPLY).value == "FAIL"
    assert cert.level is levels.Level.AT_LEAST_ONCE  # the broken trial's shard decides
    assert cert.coverage["kill"].text() == "6/6" and cert.coverage["pause"].text() == "0/1"
    assert certify.to_json(cert)["invariants"][REPLY]["by_fault_class"] == {
        "boundary:baseline": "P1",
        "boundary:kill@boundary": "F1 P5",
        "blackbox:baseline": "P1",
        "blackbox:kill@time": "P2",
    }
    assert cert.wall_s == 3.0
    failing = cert.failing()
    assert [t.label for t in failing] == [BROKEN]
    # found where this machine holds the shard's output, not where the shard wrote it
    holder = _owner("boundary", BROKEN, 3)
    assert failing[0].directory == str(tmp_path / f"shard-{holder}" / "boundary/refund" / BROKEN)


def test_a_merge_says_its_time_is_the_slowest_shards_and_gives_their_sum(
    tmp_path: pathlib.Path,
) -> None:
    """Shards that ran one after another took their sum: "N trials in <slowest>s" read as
    the whole certification's time (the reference CERTIFICATE.md said 280.2 s of ~1,074)."""
    cert = merge_certify.combine(merge.find(_write(tmp_path, 3)))  # shard I took I seconds
    assert cert.shard_wall_s == [1.0, 2.0, 3.0]
    assert (
        certify.timing(cert)
        == f"{len(cert.trials)} trials from 3 shards (slowest 3.0s, 6.0s in all)"
    )
    assert certify.timing(cert) in certify.to_markdown(cert)
    assert certify.to_json(cert)["shard_wall_s"] == [1.0, 2.0, 3.0]
    alone = certify.Certification(engine="e", engine_ref="e.yaml", modes=["boundary"], wall_s=4.0)
    assert certify.timing(alone) == "0 trials in 4.0s"


def test_an_unstruck_fault_counts_as_not_shown_after_a_merge(tmp_path: pathlib.Path) -> None:
    paths = _write(tmp_path, 1)
    record = paths[0] / shard.RECORD
    document = json.loads(record.read_text())
    document["trials"] = [  # every boundary kill planned, none struck (and none failed)
        _record("boundary", t["label"], struck=False)
        if t["plan"] and t["mode"] == "boundary"
        else t
        for t in document["trials"]
    ]
    record.write_text(json.dumps(document))
    cert = merge_certify.combine(merge.find(paths))
    assert cert.verdict_of(REPLY).value == "INCONCLUSIVE"
    assert cert.level is levels.Level.NONE


def test_a_merge_is_capped_by_the_required_trials_no_shard_ran(tmp_path: pathlib.Path) -> None:
    paths = _write(tmp_path, 2)
    for path in paths:  # no trial fails: the evidence alone would say FULL
        record = path / shard.RECORD
        document = json.loads(record.read_text())
        for trial in document["trials"]:
            trial.update(_record(trial["mode"], trial["label"]))
        record.write_text(json.dumps(document))
    cert = merge_certify.combine(merge.find(paths))
    assert cert.evidence_level is levels.Level.FULL
    assert cert.level is levels.Level.CRASH_SAFE
    assert cert.title == "CRASH-SAFE (FULL needs pause not run)"


def test_refuses_a_missing_trial_a_trial_twice_and_mixed_kinds(tmp_path: pathlib.Path) -> None:
    paths = _write(tmp_path / "a", 2)
    record = paths[0] / shard.RECORD
    document = json.loads(record.read_text())
    theirs = [label for label in KILLS if _owner("boundary", label, 2) == 2]
    document["trials"].append(_record("boundary", theirs[0]))
    record.write_text(json.dumps(document))
    with pytest.raises(errors.CrashcertError, match="reported by two shards"):
        merge_certify.combine(merge.find(paths))
    document["trials"] = [t for t in document["trials"] if t["label"] != theirs[0]]
    document["trials"] = [
        t for t in document["trials"] if t["plan"] == [] or t["mode"] != "boundary"
    ]
    record.write_text(json.dumps(document))
    with pytest.raises(errors.CrashcertError, match="no shard reports"):
        merge_certify.combine(merge.find(paths))
    matrix = _write(tmp_path / "b", 2, kind=shard.MATRIX)
    with pytest.raises(errors.CrashcertError, match="is a shard of a matrix"):
        merge.check(merge.find([paths[1], matrix[0]]))
