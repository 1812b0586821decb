"""tool.at_most_once and tool.same_key."""

from __future__ import annotations

from harness.checkers import tools, verdict
from tests.checkers import builders

V = verdict.Verdict
REFUND = 'refund_order({"amount_cents":4999,"order_id":"ord-rk-7"})'
LOOKUP = 'lookup_order({"order_id":"ord-rk-7"})'


def test_clean_passes() -> None:
    history = builders.clean()
    assert tools.check_at_most_once(history).verdict is V.PASS
    assert tools.check_same_key(history).verdict is V.PASS


def test_a_second_refund_effect_fails() -> None:
    trial = builders.clean_trial()
    again = trial.tool_request("call_refund", key="key-other")
    result = tools.check_at_most_once(trial.build())
    assert result.verdict is V.FAIL
    first = next(e for e in trial.tools if e.kind == "tool.effect" and e.tool == "refund_order")
    assert result.summary == (
        f"{REFUND}: 2 effects in the world (expected at most 1), keys ['key-call_refund', "
        f"'key-other'], effect seq {first.seq}, {again.seq + 1}"
    )


def test_a_replayable_read_may_run_twice() -> None:
    trial = builders.clean_trial()
    trial.tool_request("call_lookup")
    assert tools.check_at_most_once(trial.build()).verdict is V.PASS


def test_a_retry_with_another_key_fails() -> None:
    trial = builders.clean_trial()
    retry = trial.tool_request("call_lookup", key="key-fresh", outcome="failed_before_effect")
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    assert f"{LOOKUP}: 2 attempts carried 2 different keys ['key-call_lookup', 'key-fresh']" in (
        result.summary
    )
    assert str(retry.seq) in result.summary


def test_a_request_without_a_key_fails() -> None:
    trial = builders.clean_trial()
    bare = trial.tool_request("call_refund", key=None, outcome="deduplicated", effect=False)
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    assert f"{REFUND}: request seq [{bare.seq}] carried no idempotency key" == result.summary


def test_two_calls_sharing_a_key_fail() -> None:
    trial = builders.Trial()
    trial.tool_request("call_lookup", key="k-1")
    trial.tool_request("call_refund", key="k-1")
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    assert f"key 'k-1' shared by 2 distinct calls: {LOOKUP}; {REFUND}" == result.summary


def test_arguments_in_another_key_order_are_the_same_call() -> None:
    trial = builders.clean_trial()
    trial.tool_request(
        "call_refund",
        key="key-call_refund",
        outcome="deduplicated",
        effect=False,
        arguments={"order_id": builders.ORDER, "amount_cents": 4999},
    )
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.PASS
    assert f"{REFUND}: 2 attempt(s), key 'key-call_refund'" in builders.evidence(result)
