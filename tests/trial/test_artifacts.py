"""Trial directories round-trip: what analyze reads is what the trial wrote."""

from __future__ import annotations

import json

import pytest

from harness import errors
from harness.checkers import judge
from harness.faults import spec
from harness.record import history
from harness.scenario import schema as scenario
from harness.trial import artifacts
from harness.world import ledger

SCENARIO = scenario.parse(
    {
        "name": "tiny",
        "input": {"user": "hi"},
        "turns": [{"content": "hello {run}"}],
    }
)


def _history() -> history.TrialHistory:
    return history.TrialHistory(
        trial_id="t1",
        engine="reference",
        scenario=SCENARIO,
        plan=[spec.FaultStep(point="reply.ready")],
        run_key="tiny-t1",
        run_id="r1",
        events=[
            history.BoundaryHit(
                seq=1, t=1.0, point="reply.ready", occurrence=1, run_id="r1", worker_id="w1", pid=5
            ),
            history.FaultApplied(seq=2, t=1.1, action="kill", step="kill@reply.ready#1"),
        ],
        model=[
            ledger.ModelRequest(
                seq=3, t=1.2, run_key="tiny-t1", turn=0, messages=[], status_code=200
            )
        ],
        sink=[
            ledger.ReplyDelivery(
                seq=4, t=1.3, key="k", run_id="r1", content="hello tiny-t1", request_seq=3
            )
        ],
        engine_tables={"runs": [{"id": "r1"}]},
        started_at=1.0,
        ended_at=2.0,
    )


def test_history_round_trip(tmp_path):
    original = _history()
    artifacts.write_trial(tmp_path, original, verdicts=[], verdict="PASS", repro="crashcert run x")
    again = artifacts.read_history(tmp_path / "history.jsonl")
    assert again == original
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["plan"][0]["point"] == "reply.ready"
    assert (tmp_path / "repro.txt").read_text().strip() == "crashcert run x"
    assert artifacts.find_trials(tmp_path) == [tmp_path]


def test_corrupt_history_names_the_line(tmp_path):
    (tmp_path / "history.jsonl").write_text('{"type": "header"}\nnot json\n')
    with pytest.raises(errors.CrashcertError, match=r"history.jsonl:2"):
        artifacts.read_history(tmp_path / "history.jsonl")


def test_find_trials_without_any_is_an_error(tmp_path):
    with pytest.raises(errors.CrashcertError, match="no trial directory"):
        artifacts.find_trials(tmp_path)


def test_a_stored_black_box_trial_is_judged_again_as_it_was_live(tmp_path):
    """analyze re-judges with the live trial's rules: black-box reading and plan.applied."""
    from harness.checkers import verdict

    stored = _history().model_copy(
        update={
            "plan": [spec.FaultStep(point="world:reply.accepted")],
            "events": [
                history.BoundaryHit(
                    seq=1,
                    t=1.0,
                    point="world:reply.accepted",
                    occurrence=1,
                    run_id=None,
                    worker_id=None,
                    pid=None,
                ),
                history.FaultApplied(
                    seq=2, t=1.1, action="kill", step="kill@world:reply.accepted#1"
                ),
            ],
            "engine_tables": {},
        }
    )
    artifacts.write_trial(tmp_path, stored, verdicts=[], verdict="PASS", repro="crashcert run x")
    results, _ = judge.judge(artifacts.read_history(tmp_path / "history.jsonl"))
    by_id = {result.invariant: result for result in results}
    assert by_id["plan.applied"].verdict is verdict.Verdict.PASS
    # no engine hit: handovers are invisible, so fencing cannot PASS on a black box
    assert by_id["lease.fencing"].verdict is verdict.Verdict.INCONCLUSIVE
    assert "handovers are invisible" in by_id["lease.fencing"].summary
