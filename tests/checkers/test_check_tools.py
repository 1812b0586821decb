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
    # Each effect with its own key, in ledger order: never a sorted key list beside seqs.
    assert result.summary == (
        f"{REFUND}: 2 effects in the world (expected at most 1), effects: seq {first.seq} key "
        f"'key-call_refund', seq {again.seq + 1} key 'key-other'"
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
    first = next(r for r in trial.tools if r.kind == "tool.request" and r.tool == "lookup_order")
    assert result.summary == (
        f"{LOOKUP}: 2 attempts carried 2 different keys (expected at most 1): requests: "
        f"seq {first.seq} key 'key-call_lookup', seq {retry.seq} key 'key-fresh'"
    )


def test_a_request_without_a_key_fails() -> None:
    trial = builders.clean_trial()
    bare = trial.tool_request("call_refund", key=None, outcome="deduplicated", effect=False)
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    # a key dropped on a retry, told apart from a changed one
    assert result.summary == (
        f"{REFUND}: request seq [{bare.seq}] carried no idempotency key, where its other "
        "attempts carried ['key-call_refund']"
    )


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
    assert f"{REFUND}: 2 attempt(s), requests: seq " in builders.evidence(result)


# --- two scripted calls with equal arguments (scenarios/repeat_reminder.yaml) ----------

POST = 'post_message({"channel":"#standup-rk-7","text":"Stand-up starts in 5 minutes."})'


def test_identical_calls_across_turns_with_their_own_keys_pass() -> None:
    # A correct engine: two logical calls, two keys, two effects, as scripted.
    history = builders.reminder_trial().build()
    assert tools.check_at_most_once(history).verdict is V.PASS
    result = tools.check_same_key(history)
    assert result.verdict is V.PASS
    remind, nudge = (r for r in history.tools if r.kind == "tool.request")
    assert (
        f"{POST}: 2 attempt(s), requests: seq {remind.seq} key 'key-call_remind', "
        f"seq {nudge.seq} key 'key-call_nudge'"
    ) in builders.evidence(result)


def test_identical_calls_in_one_turn_with_their_own_keys_pass() -> None:
    history = builders.reminder_trial(same_turn=True).build()
    assert tools.check_at_most_once(history).verdict is V.PASS
    assert tools.check_same_key(history).verdict is V.PASS


def test_a_key_reused_for_two_identical_calls_fails() -> None:
    # Both calls sent under one key, each answered ok to the model: the world saw one key
    # where the script made two calls (a service honouring keys would post only once).
    trial = builders.Trial(builders.reminder_scenario())
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_remind")
    trial.finish_tool("call_remind", key="k-post")
    trial.close_round()
    trial.model_turn(1)
    trial.start_tool("call_nudge")
    trial.finish_tool("call_nudge", key="k-post")
    trial.close_round()
    trial.model_turn(2)
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"{POST}: calls ['call_nudge', 'call_remind'] were answered ok to the model, but the "
        "world saw only 1 key(s) ['k-post']: one key was shared by two logical calls"
    )


def test_a_key_the_engine_names_for_two_calls_fails() -> None:
    trial = builders.reminder_trial()
    final = trial.reports.pop()
    shared = [call.model_dump() | {"key": "k-post"} for call in final.tool_calls]
    trial.report("succeeded", tool_calls=shared)
    result = tools.check_same_key(trial.build())
    assert result.verdict is V.FAIL
    assert (
        "key 'k-post' named by the engine for 2 calls ['call_nudge', 'call_remind']"
        in result.summary
    )


def test_one_of_two_identical_calls_applied_twice_fails() -> None:
    # The first post re-executed with its own key at a service that honours no key; the
    # second call never ran: two effects, within the scripted count, but one logical call.
    trial = builders.Trial(builders.reminder_scenario())
    trial.claim("w-1")
    trial.model_turn(0)
    trial.start_tool("call_remind")
    first = trial.tool_request("call_remind")
    again = trial.tool_request("call_remind")
    result = tools.check_at_most_once(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"{POST}: key 'key-call_remind' applied 2 times (effect seq {first.seq + 1}, "
        f"{again.seq + 1}): one logical call, expected at most one effect"
    )


def test_three_effects_for_two_identical_calls_fail() -> None:
    trial = builders.reminder_trial()
    again = trial.tool_request("call_remind", key="key-fresh")
    history = trial.build()
    result = tools.check_at_most_once(history)
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        f"{POST}: 3 effects in the world (expected at most 2, one per scripted call), effects: "
    )
    assert result.summary.endswith(f", seq {again.seq + 1} key 'key-fresh'")
    same_key = tools.check_same_key(history)
    assert same_key.verdict is V.FAIL
    assert same_key.summary.startswith(
        f"{POST}: 3 attempts carried 3 different keys (expected at most 2, one per scripted "
        "call): requests: seq "
    )
    assert same_key.summary.endswith(f", seq {again.seq} key 'key-fresh'")


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_at_most_once_pass_names_each_effect_with_its_key() -> None:
    trial = builders.clean_trial()
    (effect,) = (e for e in trial.tools if e.kind == "tool.effect" and e.tool == "refund_order")
    assert tools.check_at_most_once(trial.build()).summary == (
        f"{REFUND}: 1 effect of at most 1 (seq {effect.seq} key 'key-call_refund')"
    )


def test_at_most_once_pass_without_effects_says_why_there_were_none() -> None:
    trial = builders.Trial(builders.refund_scenario(expect="budget_exhausted"))
    builders.first_round(trial)
    trial.finish("budget_exhausted")
    assert tools.check_at_most_once(trial.build()).summary == (
        "no effect of a non-replayable tool reached the world; the run ended budget_exhausted "
        "as expected"
    )


def test_same_key_pass_names_the_key_of_each_call() -> None:
    assert tools.check_same_key(builders.clean()).summary == (
        f"one key per logical call, none shared: {LOOKUP}: key 'key-call_lookup' on 1 request; "
        f"{REFUND}: key 'key-call_refund' on 1 request"
    )
