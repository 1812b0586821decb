"""Questions CONTRACT.md used to leave open, decided (section 7, "Decided questions"), each
pinned by a literal history so the checkers and the contract cannot drift apart."""

from __future__ import annotations

from harness.checkers import frontier, unknown_outcome, verdict
from harness.planning import plan
from harness.record import history
from tests.checkers import builders

V = verdict.Verdict


def test_tool_started_and_settled_may_raise_the_frontier_version_or_not() -> None:
    raising = builders.Trial()
    raising.claim("w-1")
    raising.model_turn(0)
    raising.checkpoint("tool.started", "tools_pending", tool_call_id="call_lookup")
    raising.finish_tool("call_lookup")
    raising.checkpoint("tool.settled", "tools_pending", tool_call_id="call_lookup")
    raising.close_round()
    assert frontier.check(raising.build()).verdict is V.PASS

    keeping = builders.first_round(builders.Trial())  # tool.started/settled keep the version
    assert frontier.check(keeping.build()).verdict is V.PASS


def test_model_pending_again_after_an_interruption_is_allowed() -> None:
    trial = builders.first_round(builders.Trial())
    pending = trial.checkpoint("model.pending", "model_pending", turn=1)
    builders.kill(trial, pending)
    trial.claim("w-2")
    trial.model_turn(1)  # model_pending -> model_pending: the interrupted call closed, a new one
    result = frontier.check(trial.build())
    assert result.verdict is V.PASS, result.summary


def test_points_name_their_before_commit_twins() -> None:
    trace = [("tools.pending:before_commit", 1), ("tools.pending", 1), ("tool.started", 1)]
    plans = plan.at_points(plan.fault_plans(trace, ["kill"]), ["tools.pending"])
    assert [steps[0].point for steps in plans] == ["tools.pending:before_commit", "tools.pending"]
    assert len(plan.at_points(plan.fault_plans(trace, ["kill"]), None)) == len(trace)


def _refund_interrupted(action: str) -> history.TrialHistory:
    """The refund's worker interrupted at tool.started; the successor asks the tool by key,
    hears 'not applied', and runs the call again with the same key. After a pause the
    sleeper wakes and its own request, in flight all along, lands too."""
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    started = trial.start_tool("call_refund")
    trial.fault(action, at=started)
    trial.claim("w-2")
    trial.tool_query("call_refund", key="key-call_refund", found=False)
    trial.finish_tool("call_refund", key="key-call_refund")
    if action != "kill":
        trial.tool_request("call_refund", key="key-call_refund")
    trial.close_round()
    builders.last_turn(trial)
    return trial.build()


def test_not_applied_licenses_a_rerun_only_when_the_first_attempt_cannot_land() -> None:
    killed = unknown_outcome.check(_refund_interrupted("kill"))
    assert killed.verdict is V.PASS, killed.summary
    paused = unknown_outcome.check(_refund_interrupted("pause"))
    assert paused.verdict is V.FAIL
    assert "the interrupted worker survived the pause" in builders.evidence(paused)
    # The rule an engine can follow: it cannot tell a dead worker from a sleeping one, so
    # only a tool that honours keys may get the call again (the reference engine's choice).
