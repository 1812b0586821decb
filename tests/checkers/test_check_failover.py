"""An asynchronous failover's lost commits: the engine is judged on what it could know
(harness/checkers/failover.py, CONTRACT.md section 7 "Lost acknowledged commits")."""

from __future__ import annotations

from typing import Any

from harness.checkers import failover, judge, liveness, model, submit, tools, verdict
from harness.record import history as history_module
from tests.checkers import builders, test_check_submit

V = verdict.Verdict


def _failover(
    trial: builders.Trial, at: history_module.BoundaryHit, *, lost: list[str], sync: bool
) -> None:
    observed: dict[str, Any] = {
        "sync": sync,
        "lost": lost,
        "behind": bool(lost),
        "primary_flushed_lsn": "0/4013D48",
        "standby_received_lsn": "0/4012478" if lost else "0/4013D48",
    }
    trial.fault("pg_failover", at, worker=None, observed=observed)


def decision_lost(*, lost: bool) -> history_module.TrialHistory:
    """Turn 1's decision committed (tools.pending#2), then the failover: asynchronous, it
    lost that commit, and the worker, reconnected, asks the model for turn 1 again."""
    trial = builders.first_round(builders.Trial())
    decided = trial.model_turn(1)
    _failover(trial, decided, lost=["tools.pending#2"] if lost else [], sync=not lost)
    trial.claim("w-1")
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    return builders.last_turn(trial).build()


def results(history: history_module.TrialHistory) -> dict[str, verdict.CheckResult]:
    found, _ = judge.judge(history)
    return {result.invariant: result for result in found}


def test_a_decision_the_failover_lost_may_be_asked_for_again() -> None:
    history = decision_lost(lost=True)
    # The checker alone holds the engine to the decision it reported...
    assert model.check_once_after_decision(history).verdict is V.FAIL
    # ... the judge knows the promoted standby never had it.
    judged = results(history)[model.ONCE_AFTER_DECISION]
    assert judged.verdict is V.INCONCLUSIVE
    assert "lost acknowledged commits (tools.pending#2)" in judged.summary
    assert "after its decision was committed at tools.pending#2" in judged.summary
    assert failover.lost(history) == ["tools.pending#2"]


def test_a_synchronous_failover_excuses_nothing() -> None:
    history = decision_lost(lost=False)
    assert failover.lost(history) == []
    assert results(history)[model.ONCE_AFTER_DECISION].verdict is V.FAIL


def refunded_twice(
    *, honours_key: bool, lost: list[str], status: str = "succeeded"
) -> history_module.TrialHistory:
    """The refund reached the world, its start was lost with the failover, and the
    recovering worker refunded again under a key of its own."""
    trial = builders.first_round(
        builders.Trial(builders.refund_scenario(refund_honours_key=honours_key))
    )
    trial.model_turn(1)
    started = trial.start_tool("call_refund")
    trial.tool_request("call_refund")
    _failover(trial, started, lost=lost, sync=False)
    trial.claim("w-2")
    trial.start_tool("call_refund")
    trial.finish_tool("call_refund", key="key-minted-again")
    trial.close_round()
    if status == "succeeded":
        builders.last_turn(trial)
    return trial.build()


def test_a_second_effect_of_a_keyed_tool_stays_a_failure_when_no_decision_was_lost() -> None:
    history = refunded_twice(honours_key=True, lost=["tool.started#2"])
    judged = results(history)[tools.AT_MOST_ONCE]
    assert judged.verdict is V.FAIL
    assert "honour(s) idempotency keys and no decision was lost" in builders.evidence(judged)


def test_a_second_effect_is_excused_where_the_lost_commit_was_its_only_record() -> None:
    unkeyed = results(refunded_twice(honours_key=False, lost=["tool.started#2"]))
    assert unkeyed[tools.AT_MOST_ONCE].verdict is V.INCONCLUSIVE
    decision = results(refunded_twice(honours_key=True, lost=["tools.pending#2"]))
    assert decision[tools.AT_MOST_ONCE].verdict is V.INCONCLUSIVE


def test_liveness_stays_strict_whatever_was_lost() -> None:
    history = refunded_twice(honours_key=False, lost=["tool.started#2"], status="unfinished")
    judged = results(history)[liveness.INVARIANT]
    assert judged.verdict is V.FAIL
    assert liveness.INVARIANT in failover.STRICT


def purge_lost(*, lost: list[str], resubmitted: bool = False) -> history_module.TrialHistory:
    """The run finished and was purged (run.purged#1); the failover lost the purge, and a
    new request under the key was answered by the run the promoted standby still had."""
    trial = builders.clean_trial()
    purged = trial.hit("run.purged", worker=None)
    _failover(trial, purged, lost=lost, sync=False)
    if resubmitted:
        test_check_submit.resubmit(trial, "after_finish", answered=builders.RUN_ID)
    test_check_submit.reused_key(trial, answered=builders.RUN_ID)
    return trial.build()


def test_a_reused_key_answered_by_a_purged_run_the_failover_brought_back_is_inconclusive() -> None:
    history = purge_lost(lost=["run.purged#1"])
    # The checker alone sees the purged run answer the new request ...
    assert submit.check(history).verdict is V.FAIL
    # ... the judge knows the promoted standby never had the purge.
    judged = results(history)[submit.INVARIANT]
    assert judged.verdict is V.INCONCLUSIVE, judged
    assert "lost acknowledged commits (run.purged#1)" in judged.summary
    assert "was answered by the purged run run-1" in judged.summary


def test_a_reused_key_stays_strict_when_the_purge_was_not_what_was_lost() -> None:
    judged = results(purge_lost(lost=["reply.sent#1"]))[submit.INVARIANT]
    assert judged.verdict is V.FAIL, judged
    # nor is a client's resubmit excused by a lost purge: a second run stays a second run
    judged = results(purge_lost(lost=["run.purged#1"], resubmitted=True))[submit.INVARIANT]
    assert judged.verdict is V.FAIL, judged
