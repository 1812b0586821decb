"""tool.unknown_outcome on a replayable tool redeployed mid-run (scenario `redeploy`): a
call sent before its tool's fingerprint changed is never replayed after the change."""

from __future__ import annotations

from harness.checkers import unknown_outcome, verdict
from tests.checkers import builders

V = verdict.Verdict
LOOKUP = 'lookup_order({"order_id":"ord-rk-7"})'


def redeployed_then_killed() -> builders.Trial:
    """The lookup reached the service, which was redeployed; w-1 is killed before it
    recorded the answer, w-2 takes the run over."""
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.redeploy(trial.tool_request("call_lookup"))
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    return trial


def to_the_end(trial: builders.Trial) -> builders.Trial:
    trial.close_round()
    builders.refund_round(trial)
    return builders.last_turn(trial)


def test_a_replay_after_the_fingerprint_changed_fails() -> None:
    # An engine that ignores the fingerprint: replayable, so it runs the lookup again.
    trial = redeployed_then_killed()
    change = trial.tools[-1]
    again = trial.tool_request("call_lookup")
    trial.settle("call_lookup", "succeeded", builders.ok(again.result))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(f"{LOOKUP} interrupted by kill at tool.returned#1")
    assert (
        f"requested again at seq {again.seq} (key 'key-call_lookup'): a call sent before its "
        f"tool was redeployed (seq {change.seq}, fingerprint now "
    ) in result.summary


def test_outcome_unknown_after_the_fingerprint_changed_passes() -> None:
    trial = redeployed_then_killed()
    trial.settle("call_lookup", "outcome_unknown", builders.UNKNOWN)
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS
    text = builders.evidence(result)
    assert "replayable, but lookup_order was redeployed at seq" in text
    assert "not requested again, reported outcome_unknown" in result.summary


def test_a_success_claimed_without_replaying_after_the_change_fails() -> None:
    # Not replayed, but reported succeeded: after a kill the outcome is unknown.
    trial = redeployed_then_killed()
    trial.settle("call_lookup", "succeeded", builders.ok(builders.LOOKUP_RESULT))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.FAIL
    assert "'call_lookup': 'succeeded'} instead of outcome_unknown" in result.summary


def test_a_replay_that_itself_made_the_change_passes() -> None:
    # Killed before the lookup left: the replay runs under the fingerprint the call was
    # started with, and only then the service is redeployed.
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    builders.kill(trial, trial.start_tool("call_lookup"))
    trial.claim("w-2")
    again = trial.tool_request("call_lookup")
    trial.redeploy(again)
    trial.settle("call_lookup", "succeeded", builders.ok(again.result))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS
    assert "replayable, may run again" in builders.evidence(result)


def test_the_paused_workers_own_request_after_the_change_is_not_a_replay() -> None:
    # w-2 replays the lookup (the fingerprint is unchanged: w-1 sent nothing) and so
    # redeploys the service; w-1 wakes and sends the request it was about to send.
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    trial.fault("pause", trial.start_tool("call_lookup"))
    trial.claim("w-2")
    replay = trial.tool_request("call_lookup")
    trial.redeploy(replay)
    trial.settle("call_lookup", "succeeded", builders.ok(replay.result))
    trial.fault("resume", worker="w-1")
    trial.tool_request("call_lookup")  # w-1 continues into its call
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS
    assert "in-flight remote calls are not fenceable" in builders.evidence(result)


def test_a_503_before_the_change_started_nothing_to_protect() -> None:
    # The first request was refused with applied:false and made the redeploy; the retry
    # and the replay after the kill both run under the new fingerprint.
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.redeploy(trial.tool_request("call_lookup", outcome="failed_before_effect"))
    trial.tool_request("call_lookup")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    again = trial.tool_request("call_lookup")
    trial.settle("call_lookup", "succeeded", builders.ok(again.result))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS
    assert "replayable, may run again" in builders.evidence(result)


def test_without_a_redeploy_the_same_replay_passes() -> None:
    # The control: the replay of the first test, the service never redeployed.
    trial = builders.Trial(builders.refund_scenario())
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.tool_request("call_lookup")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    again = trial.tool_request("call_lookup")
    trial.settle("call_lookup", "succeeded", builders.ok(again.result))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS


def test_a_redeploy_after_the_allowed_replay_settled_the_call_passes() -> None:
    # Killed after the lookup left, replayed under its unchanged fingerprint (allowed), and
    # only once the run went on is the service redeployed (an engine upgrade after the
    # reply: `kill@tool.returned#1` + `upgrade@world:reply.accepted#1`). The redeploy came
    # after the call was resolved: nothing was replayed into the new version. The old
    # checker judged it as a killed call never asked again, claimed succeeded: FAIL.
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.tool_request("call_lookup")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    again = trial.tool_request("call_lookup")
    trial.settle("call_lookup", "succeeded", builders.ok(again.result))
    trial.redeploy(again)
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.PASS, result.summary
    assert "replayable, may run again" in builders.evidence(result)


def test_a_replay_before_and_another_after_the_redeploy_still_fails() -> None:
    # The same, but the call is requested once more after the change: into the new version.
    trial = builders.Trial(builders.refund_scenario(lookup_redeployed=True))
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.tool_request("call_lookup")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    again = trial.tool_request("call_lookup")
    trial.redeploy(again)
    late = trial.tool_request("call_lookup")
    trial.settle("call_lookup", "succeeded", builders.ok(late.result))
    result = unknown_outcome.check(to_the_end(trial).build())
    assert result.verdict is V.FAIL, result.summary
    assert "a call sent before its tool was redeployed" in result.summary
