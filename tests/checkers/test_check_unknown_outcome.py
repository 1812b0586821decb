"""tool.unknown_outcome: interrupted non-replayable calls are never re-executed blindly."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers import tools, unknown_outcome, verdict
from tests.checkers import builders

V = verdict.Verdict
REFUND = 'refund_order({"amount_cents":4999,"order_id":"ord-rk-7"})'


def check(trial: builders.Trial) -> verdict.CheckResult:
    return unknown_outcome.check(trial.build())


def killed_at_refund_started(*, queryable: bool = True) -> builders.Trial:
    scenario = builders.refund_scenario(refund_queryable=queryable)
    trial = builders.first_round(builders.Trial(scenario))
    trial.model_turn(1)
    builders.kill(trial, trial.start_tool("call_refund"))
    trial.claim("w-2")
    return trial


def killed_at_refund_returned(
    *, queryable: bool = True, honours_key: bool = False
) -> builders.Trial:
    scenario = builders.refund_scenario(refund_queryable=queryable, refund_honours_key=honours_key)
    trial = builders.first_round(builders.Trial(scenario))
    trial.model_turn(1)
    trial.start_tool("call_refund")
    trial.tool_request("call_refund")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_refund"))
    trial.claim("w-2")
    return trial


def resume(trial: builders.Trial, state: str, answer: dict[str, Any]) -> builders.Trial:
    trial.settle("call_refund", state, answer)
    trial.close_round()
    return builders.last_turn(trial)


def test_clean_passes() -> None:
    result = unknown_outcome.check(builders.clean())
    assert result.verdict is V.PASS
    assert result.evidence[0] == (
        "no fault struck inside a tool window and no call ended outcome_unknown"
    )


def test_queryable_tool_asked_by_key_before_the_repeat_passes() -> None:
    trial = killed_at_refund_started()
    query = trial.tool_query("call_refund", found=False)
    request = trial.tool_request("call_refund")
    result = check(resume(trial, "succeeded", builders.ok(request.result)))
    assert result.verdict is V.PASS
    assert f"query seq {query.seq}, not found) before requesting again at seq {request.seq}" in (
        builders.evidence(result)
    )


def test_queryable_tool_repeated_without_asking_fails() -> None:
    trial = killed_at_refund_started()
    request = trial.tool_request("call_refund")
    result = check(resume(trial, "succeeded", builders.ok(request.result)))
    assert result.verdict is V.FAIL
    assert result.summary.startswith(f"{REFUND} interrupted by kill at tool.started#2 worker w-1")
    assert f"requested again at seq {request.seq} (key 'key-call_refund') without first" in (
        result.summary
    )


def test_repeat_after_the_query_found_the_effect_fails() -> None:
    trial = killed_at_refund_returned()
    query = trial.tool_query("call_refund", found=True)
    request = trial.tool_request("call_refund")
    result = check(resume(trial, "succeeded", builders.ok(request.result)))
    assert result.verdict is V.FAIL
    assert f"query seq {query.seq} found the effect applied" in result.summary


def test_non_queryable_call_re_executed_after_a_kill_fails() -> None:
    trial = killed_at_refund_returned(queryable=False)
    again = trial.tool_request("call_refund")
    result = check(resume(trial, "succeeded", builders.ok(again.result)))
    assert result.verdict is V.FAIL
    assert f"{REFUND} interrupted by kill at tool.returned#2" in result.summary
    assert f"requested again at seq {again.seq} (key 'key-call_refund'): a non-replayable" in (
        result.summary
    )


def test_without_detail_the_call_in_flight_at_tool_returned_is_blamed() -> None:
    trial = killed_at_refund_returned(queryable=False)
    trial.tool_request("call_refund")
    history = builders.without_detail(resume(trial, "succeeded", builders.ok({})).build())
    result = unknown_outcome.check(history)
    assert result.verdict is V.FAIL
    assert REFUND in result.summary


def test_without_detail_a_kill_at_tool_started_is_inconclusive() -> None:
    trial = killed_at_refund_started(queryable=False)
    history = builders.without_detail(resume(trial, "outcome_unknown", builders.UNKNOWN).build())
    result = unknown_outcome.check(history)
    assert result.verdict is V.INCONCLUSIVE
    assert "without detail.tool_call_id" in result.summary


def test_same_key_repeat_to_a_tool_honouring_keys_passes_with_a_note() -> None:
    trial = killed_at_refund_returned(queryable=False, honours_key=True)
    again = trial.tool_request("call_refund", outcome="deduplicated", effect=False)
    result = check(resume(trial, "succeeded", builders.ok(again.result)))
    assert result.verdict is V.PASS
    assert "the tool honours keys, so the world applied no second effect" in (
        builders.evidence(result)
    )


def test_outcome_unknown_told_to_the_model_passes() -> None:
    trial = killed_at_refund_started(queryable=False)
    result = check(resume(trial, "outcome_unknown", builders.UNKNOWN))
    assert result.verdict is V.PASS
    told = next(r for r in trial.model if r.turn == 2)
    assert (
        f"call 'call_refund' (report: outcome_unknown): first model request with its tool "
        f"message is seq {told.seq}, status 'outcome_unknown'"
    ) in builders.evidence(result)


def test_outcome_unknown_presented_as_ok_fails() -> None:
    trial = killed_at_refund_started(queryable=False)
    result = check(resume(trial, "outcome_unknown", builders.ok(builders.REFUND_RESULT)))
    assert result.verdict is V.FAIL
    assert "call 'call_refund' (report: outcome_unknown)" in result.summary
    assert "status 'ok'" in result.summary


def test_outcome_unknown_missing_from_the_transcript_fails() -> None:
    trial = resume(killed_at_refund_started(queryable=False), "outcome_unknown", builders.UNKNOWN)
    history = trial.build()
    model = [
        r.model_copy(
            update={"messages": [m for m in r.messages if m.get("tool_call_id") != "call_refund"]}
        )
        for r in history.model
    ]
    result = unknown_outcome.check(history.model_copy(update={"model": model}))
    assert result.verdict is V.FAIL
    assert "'call_refund' (report: outcome_unknown) is missing from every model request" in (
        result.summary
    )


def test_success_claimed_for_a_call_that_never_ran_fails() -> None:
    trial = killed_at_refund_started(queryable=False)
    result = check(resume(trial, "succeeded", builders.ok(builders.REFUND_RESULT)))
    assert result.verdict is V.FAIL
    text = builders.evidence(result)
    assert f"report says non-replayable call 'call_refund' {REFUND} succeeded" in text
    assert "no effect of it" in text
    assert "instead of outcome_unknown" in text


def test_the_paused_workers_own_request_in_flight_is_not_a_repeat() -> None:
    trial = builders.first_round(builders.Trial(builders.refund_scenario(refund_queryable=False)))
    trial.model_turn(1)
    trial.fault("pause", trial.start_tool("call_refund"))
    trial.claim("w-2")
    trial.settle("call_refund", "outcome_unknown", builders.UNKNOWN)
    trial.fault("resume", worker="w-1")
    trial.tool_request("call_refund")  # w-1 continues into its call
    trial.close_round()
    result = check(builders.last_turn(trial))
    assert result.verdict is V.PASS
    assert "in-flight remote calls are not fenceable" in builders.evidence(result)


def test_a_replayable_call_may_run_again() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_lookup")
    trial.tool_request("call_lookup")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_lookup"))
    trial.claim("w-2")
    trial.finish_tool("call_lookup")
    result = check(trial)
    assert result.verdict is V.PASS
    assert "replayable, may run again" in builders.evidence(result)


def test_re_execution_racing_a_paused_workers_call_fails() -> None:
    # Seen with the reference engine: pause@tool.started#2 on the refund scenario.
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.fault("pause", trial.start_tool("call_refund"))
    trial.claim("w-2")
    query = trial.tool_query("call_refund", found=False)
    trial.start_tool("call_refund")
    trial.fault("resume", worker="w-1")
    trial.tool_request("call_refund")  # w-1's request, in flight since before the pause
    again = trial.tool_request("call_refund")  # w-2 executes it again
    result = check(resume(trial, "succeeded", builders.ok(builders.REFUND_RESULT)))
    assert result.verdict is V.FAIL
    assert result.summary.startswith(f"{REFUND} interrupted by pause at tool.started#2 worker w-1")
    assert (
        f"re-executed at seq {again.seq} after query seq {query.seq} found nothing, but the "
        "interrupted worker survived the pause"
    ) in result.summary
    assert tools.check_at_most_once(trial.build()).verdict is V.FAIL


# --- two scripted calls with equal arguments (scenarios/repeat_reminder.yaml) ----------

POST = 'post_message({"channel":"#standup-rk-7","text":"Stand-up starts in 5 minutes."})'


def reminder_killed_at_first_post(*, same_turn: bool = False) -> builders.Trial:
    trial = builders.Trial(builders.reminder_scenario(same_turn=same_turn))
    trial.claim("w-1")
    trial.model_turn(0)
    builders.kill(trial, trial.start_tool("call_remind"))
    trial.claim("w-2")
    return trial


def post_the_nudge(trial: builders.Trial, remind: str, answer: dict[str, Any]) -> builders.Trial:
    """The first post settled as `remind`; the second post runs; the run ends."""
    same_turn = len(trial.scenario.turns) == 2
    trial.settle("call_remind", remind, answer)
    if not same_turn:
        trial.close_round()
        trial.model_turn(1)
    trial.run_tool("call_nudge")
    trial.close_round()
    trial.model_turn(len(trial.scenario.turns) - 1)
    trial.deliver()
    trial.finish()
    return trial


@pytest.mark.parametrize("same_turn", [False, True], ids=["across_turns", "same_turn"])
def test_the_second_of_two_identical_calls_is_not_a_repeat_of_the_first(same_turn: bool) -> None:
    trial = reminder_killed_at_first_post(same_turn=same_turn)
    result = check(post_the_nudge(trial, "outcome_unknown", builders.UNKNOWN))
    assert result.verdict is V.PASS, result.summary


def test_the_killed_one_of_two_identical_calls_re_executed_fails() -> None:
    trial = reminder_killed_at_first_post()
    again = trial.tool_request("call_remind")
    result = check(post_the_nudge(trial, "succeeded", builders.ok(again.result)))
    assert result.verdict is V.FAIL
    assert result.summary.startswith(f"{POST} interrupted by kill at tool.started#1 worker w-1")
    assert f"requested again at seq {again.seq} (key 'key-call_remind'): a non-replayable" in (
        result.summary
    )


def test_the_killed_one_of_two_identical_calls_re_executed_under_a_fresh_key_fails() -> None:
    trial = reminder_killed_at_first_post()
    again = trial.tool_request("call_remind", key="key-fresh")
    result = check(post_the_nudge(trial, "succeeded", builders.ok(again.result)))
    assert result.verdict is V.FAIL
    assert f"requested again at seq {again.seq} (key 'key-fresh')" in result.summary


def test_a_hit_naming_a_key_is_the_call_of_that_key() -> None:
    # A black box's translated hit guesses the call id from the arguments (here wrongly,
    # the nudge); its key, named by the engine for the reminder, tells the call.
    trial = builders.Trial(builders.reminder_scenario())
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_remind")
    trial.tool_request("call_remind")
    builders.kill(
        trial, trial.hit("tool.returned", tool_call_id="call_nudge", key="key-call_remind")
    )
    trial.claim("w-2")
    result = check(post_the_nudge(trial, "outcome_unknown", builders.UNKNOWN))
    assert result.verdict is V.PASS, result.summary
    assert (
        f"{POST} (call 'call_remind') interrupted by kill at tool.returned#1: not requested "
        "again, reported outcome_unknown"
    ) in result.summary


def test_a_request_no_named_key_places_among_identical_calls_is_inconclusive() -> None:
    trial = post_the_nudge(reminder_killed_at_first_post(), "outcome_unknown", builders.UNKNOWN)
    trial.reports[-1] = trial.reports[-1].model_copy(update={"tool_calls": []})
    nudge = next(r for r in trial.tools if r.kind == "tool.request")
    result = check(trial)
    assert result.verdict is V.INCONCLUSIVE
    assert result.summary.startswith(f"{POST} interrupted by kill at tool.started#1 worker w-1")
    assert result.summary.endswith(
        f"request seq [{nudge.seq}] may answer another of the 2 calls with these arguments "
        "(the engine names no key for it)"
    )


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_without_an_interruption_says_there_was_none() -> None:
    assert unknown_outcome.check(builders.clean()).summary == (
        "no fault struck inside a tool window and no call ended outcome_unknown"
    )


def test_pass_after_an_answer_by_key_says_found_applied_not_re_executed() -> None:
    trial = killed_at_refund_returned()
    query = trial.tool_query("call_refund", found=True)
    result = check(resume(trial, "succeeded", builders.ok(builders.REFUND_RESULT)))
    assert result.verdict is V.PASS
    assert result.summary == (
        f"{REFUND} (call 'call_refund') interrupted by kill at tool.returned#2: asked by key "
        f"'key-call_refund', found applied (query seq {query.seq}), not re-executed, reported "
        "succeeded"
    )


def test_pass_after_a_rerun_says_it_was_asked_first() -> None:
    trial = killed_at_refund_started()
    query = trial.tool_query("call_refund", found=False)
    request = trial.tool_request("call_refund")
    result = check(resume(trial, "succeeded", builders.ok(request.result)))
    assert result.summary == (
        f"{REFUND} interrupted by kill at tool.started#2: asked by key 'key-call_refund', not "
        f"found (query seq {query.seq}), and only then run again (seq {request.seq})"
    )


def test_pass_of_an_unknown_outcome_says_the_model_was_told() -> None:
    trial = killed_at_refund_started(queryable=False)
    result = check(resume(trial, "outcome_unknown", builders.UNKNOWN))
    told = next(r for r in trial.model if r.turn == 2)
    assert result.summary == (
        f"call 'call_refund' ended outcome_unknown and the model was told so (model request "
        f"seq {told.seq}); {REFUND} (call 'call_refund') interrupted by kill at "
        "tool.started#2: not requested again, reported outcome_unknown"
    )
