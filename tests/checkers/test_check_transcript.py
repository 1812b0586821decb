"""transcript.intact."""

from __future__ import annotations

import json

from harness.checkers import transcript, verdict
from tests.checkers import builders

V = verdict.Verdict
LOOKUP_OK = json.dumps(builders.ok(builders.LOOKUP_RESULT))


def test_clean_passes() -> None:
    result = transcript.check(builders.clean())
    assert result.verdict is V.PASS
    assert "carries the 2 earlier scripted calls" in builders.evidence(result)


def test_problems_the_model_saw_fail() -> None:
    trial = builders.clean_trial()
    problem = "duplicate_answer: tool call 'call_lookup' answered again at messages[5]"
    trial.model_request(1, problems=[problem])
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(f"model request seq {trial.model[-1].seq} (turn 1): {problem}")


def test_a_tool_answer_lost_from_the_last_request_fails() -> None:
    trial = builders.first_round(builders.Trial())
    builders.refund_round(trial)
    messages = [m for m in trial.messages(2) if m.get("tool_call_id") != "call_lookup"]
    last = trial.model_request(2, messages=messages)
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert (
        f"last model request seq {last.seq}: call 'call_lookup' "
        'lookup_order({"order_id":"ord-rk-7"}) made 1 times and answered 0 times '
        "(expected 1 and 1)"
    ) in result.summary


def test_a_tool_answer_duplicated_in_the_last_request_fails() -> None:
    trial = builders.first_round(builders.Trial())
    messages = trial.messages(1)
    messages.append({"role": "tool", "tool_call_id": "call_lookup", "content": LOOKUP_OK})
    trial.model_request(1, messages=messages)
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert "made 1 times and answered 2 times" in result.summary


def test_an_ok_result_differing_from_the_world_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.answers["call_lookup"] = builders.ok({"order_id": "ord-1", "amount_cents": 1})
    request = trial.model_request(1)
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        f"model request seq {request.seq}: ok message for 'call_lookup' "
        'lookup_order({"order_id":"ord-rk-7"}) carries {"amount_cents":1,"order_id":"ord-1"}, '
        "not what the world answered"
    )


def test_an_invented_ok_result_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.start_tool("call_refund")
    trial.tool_request("call_refund", outcome="effect_then_failed")
    trial.settle("call_refund", "succeeded", builders.ok(builders.REFUND_RESULT))
    trial.close_round()
    trial.model_request(2)
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert "ok message for 'call_refund'" in result.summary
    assert "but the world never answered it ok" in result.summary


def test_a_reply_other_than_the_scripted_one_fails() -> None:
    trial = builders.first_round(builders.Trial())
    builders.refund_round(trial)
    trial.model_turn(2)
    delivered = trial.delivery(content="Refunded, probably.")
    result = transcript.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"delivery seq {delivered.seq}: content 'Refunded, probably.' is not the scripted "
        f"reply {builders.REPLY!r}"
    )


def test_no_model_request_is_inconclusive() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.report("failed")
    assert transcript.check(trial.build()).verdict is V.INCONCLUSIVE


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_names_the_last_request_the_results_and_the_delivery() -> None:
    trial = builders.clean_trial()
    last = trial.model[-1]
    (delivered,) = (entry for entry in trial.sink if entry.kind == "reply.delivery")
    assert transcript.check(trial.build()).summary == (
        f"last model request seq {last.seq} (turn 2) carries all 2 earlier scripted calls, each "
        "made and answered once; 3 answered requests without a transcript problem; 2 ok "
        f"results as the world answered; reply delivered as scripted (delivery seq "
        f"{delivered.seq})"
    )


def test_pass_before_any_delivery_says_there_was_none_to_compare() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    trial.report("running")
    assert transcript.check(trial.build()).summary.endswith("; no reply delivered, none to compare")
