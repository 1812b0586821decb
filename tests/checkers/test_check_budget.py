"""budget.not_restored."""

from __future__ import annotations

from typing import Any

from harness.checkers import budget, verdict
from harness.record import history as history_module
from tests.checkers import builders

V = verdict.Verdict
TOTALS = [prompt + completion for prompt, completion in builders.USAGE]


def with_budget(trial: builders.Trial, status: str = "succeeded", **used: int) -> builders.Trial:
    """Replace the final report by one whose budgets say `used` (limits from the scenario)."""
    final = trial.reports.pop()
    budgets: dict[str, Any] = {name: use.model_dump() for name, use in final.budget.items()}
    for name, value in used.items():
        budgets[name]["used"] = value
    trial.report(status, budget=budgets)
    return trial


def test_clean_passes() -> None:
    result = budget.check(builders.clean())
    assert result.verdict is V.PASS
    assert "3 model requests answered 200, iterations used 3" in builders.evidence(result)


def test_no_report_is_inconclusive() -> None:
    trial = builders.clean_trial()
    trial.reports = []
    assert budget.check(trial.build()).verdict is V.INCONCLUSIVE


def test_used_going_down_across_a_restart_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.report("running")
    trial.iterations = 1  # the new worker restored the budget
    trial.report("running")
    result = budget.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        "iterations used went down from 2 (snapshot 0) to 1 (snapshot 1)"
    )


def test_unreserved_inference_fails() -> None:
    result = budget.check(with_budget(builders.clean_trial(), iterations=2).build())
    assert result.verdict is V.FAIL
    assert "3 model requests answered 200, iterations used 2: an inference was not reserved" == (
        result.summary
    )


def test_uncounted_tool_call_fails() -> None:
    result = budget.check(with_budget(builders.clean_trial(), tool_calls=1).build())
    assert result.verdict is V.FAIL
    assert "2 distinct calls reached the world, tool_calls used 1: a call was not counted" == (
        result.summary
    )


def test_over_the_iteration_limit_fails() -> None:
    result = budget.check(with_budget(builders.clean_trial(), iterations=7).build())
    assert result.verdict is V.FAIL
    assert "iterations used 7 exceeds its limit 6 (snapshot 0)" in builders.evidence(result)


def test_billed_tokens_must_equal_recorded_usage() -> None:
    result = budget.check(with_budget(builders.clean_trial(), tokens=sum(TOTALS) + 1).build())
    assert result.verdict is V.FAIL
    assert (
        f"tokens used {sum(TOTALS) + 1} != {sum(TOTALS)}, the usage of the report's 3 recorded "
        "model calls"
    ) == result.summary


def test_usage_billed_twice_for_one_response_fails() -> None:
    trial = builders.clean_trial()
    trial.reports = []
    trial.recorded.append(trial.recorded[1])  # turn 1 recorded twice, one real response
    result = budget.check(with_budget(trial.clean_report(), tokens=sum(TOTALS) + TOTALS[1]).build())
    assert result.verdict is V.FAIL
    assert (
        f"recorded model call of turn 1 bills {TOTALS[1]} tokens, matching no unused 200 response"
    ) in result.summary


def test_token_overrun_within_the_last_call_is_allowed_when_exhausted() -> None:
    scenario = builders.refund_scenario(expect="budget_exhausted")
    scenario = scenario.model_copy(
        update={"budgets": scenario.budgets.model_copy(update={"tokens": 500})}
    )
    trial = builders.Trial(scenario)
    builders.first_round(trial)
    trial.model_turn(1)
    trial.report("budget_exhausted")
    result = budget.check(trial.build())
    assert result.verdict is V.PASS
    assert (
        f"tokens used {TOTALS[0] + TOTALS[1]} exceed the limit 500 by 63, within"
        in builders.evidence(result)
    )
    assert "were really consumed" in builders.evidence(result)


def test_token_overrun_beyond_the_last_call_fails() -> None:
    scenario = builders.refund_scenario()
    scenario = scenario.model_copy(
        update={"budgets": scenario.budgets.model_copy(update={"tokens": 200})}
    )
    trial = builders.Trial(scenario)
    builders.first_round(trial)
    trial.model_turn(1)
    trial.report("budget_exhausted")
    result = budget.check(trial.build())
    assert result.verdict is V.FAIL
    assert f"tokens used {TOTALS[0] + TOTALS[1]} exceed the limit 200 by" in result.summary


def test_budget_ledger_rows_are_unique() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {
        "budget_ledger": [
            {"kind": "iteration", "ref": "mc-1"},
            {"kind": "iteration", "ref": "mc-1"},
            {"kind": "iteration", "ref": "mc-2"},
        ]
    }
    result = budget.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == "budget_ledger has 2 rows for (kind iteration, ref mc-1)"


def test_a_stale_report_is_not_compared_with_the_world() -> None:
    # The harness broke while the run went on: its last snapshot lags behind the ledgers.
    trial = builders.Trial()
    trial.claim("w-1")
    trial.report("running")
    trial.model_call(0)
    result = budget.check(trial.build())
    assert result.verdict is V.INCONCLUSIVE
    assert result.summary == (
        "last report is running, not terminal (the world may be ahead of it): 1 model requests "
        "answered 200, iterations used 0: an inference was not reserved"
    )


def hide_model_call(trial: builders.Trial, turn: int) -> builders.Trial:
    """The final report leaves out the recorded call of `turn` and bills the rest only."""
    trial.reports = []
    trial.recorded = [call for call in trial.recorded if call.turn != turn]
    return trial.clean_report()


def test_a_report_hiding_a_used_model_call_fails() -> None:
    # The world answered 3 calls (973 tokens); the report lists 2 calls and 735 tokens.
    trial = hide_model_call(builders.clean_trial(), turn=0)
    answer = next(request for request in trial.model if request.turn == 0)
    lookup = next(request for request in trial.tools if request.kind == "tool.request")
    final = trial.reports[-1]
    assert (len(final.model_calls), final.budget["tokens"].used) == (2, 735)
    result = budget.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"model answer seq {answer.seq} (turn 0, 238 tokens: prompt 220, completion 18) was "
        f'used (tool request seq {lookup.seq} lookup_order({{"order_id":"ord-rk-7"}})), but '
        "the report bills no model call of turn 0"
    )


def test_a_report_hiding_the_reply_turn_fails() -> None:
    trial = hide_model_call(builders.clean_trial(), turn=2)
    answer = next(request for request in trial.model if request.turn == 2)
    posted = next(entry for entry in trial.sink if entry.kind == "reply.request")
    result = budget.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"model answer seq {answer.seq} (turn 2, 410 tokens: prompt 380, completion 30) was "
        f"used (reply request seq {posted.seq} posts its content), but the report bills no "
        "model call of turn 2"
    )


def test_an_answer_lost_before_it_was_recorded_is_not_billed() -> None:
    # Killed at model.returned: the answer was never recorded; the retry's answer is.
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    builders.kill(trial, trial.last_hit())
    trial.claim("w-2")
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    result = budget.check(builders.last_turn(trial).build())
    assert result.verdict is V.PASS, result.summary


def test_an_answer_never_used_is_not_billed() -> None:
    # The last answer is lost to a kill and the run ends before asking again.
    trial = builders.refund_round(builders.first_round(builders.Trial()))
    trial.model_call(2)
    builders.kill(trial, trial.last_hit())
    trial.report("dead_lettered")
    result = budget.check(trial.build())
    assert result.verdict is V.PASS, result.summary
    assert "turn 2: 1 answer(s), none used afterwards" in builders.evidence(result)


def test_two_identical_calls_count_as_two() -> None:
    result = budget.check(builders.reminder_trial().build())
    assert result.verdict is V.PASS
    assert "2 distinct calls reached the world, tool_calls used 2" in builders.evidence(result)


def test_an_uncounted_second_identical_call_fails() -> None:
    result = budget.check(with_budget(builders.reminder_trial(), tool_calls=1).build())
    assert result.verdict is V.FAIL
    assert "2 distinct calls reached the world, tool_calls used 1: a call was not counted" == (
        result.summary
    )


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_names_each_budget_against_what_the_world_served() -> None:
    trial = builders.clean_trial()
    trial.reports.insert(0, trial.reports[0])  # an earlier snapshot, read mid-run
    tokens = sum(prompt + completion for prompt, completion in builders.USAGE)
    assert budget.check(trial.build()).summary == (
        "iterations 3 of 6 for 3 answered model requests, tool_calls 2 of 4 for 2 calls that "
        f"reached a tool, tokens {tokens} of 5000 for 3 recorded model calls; never lower "
        "across 2 report snapshots"
    )


def two_owners_drew_on_one_reservation() -> builders.Trial:
    """A dup_owner trial of tests/quality (resume_own_runs, model.pending#1) as CI saw it:
    the held worker reserved turn 0's inference, its twin under the same id asked for it,
    and so did the held worker: two answers, one reservation. The twin then reserved turn
    1 and lost the run before asking; the held worker took it back and reserved turn 1
    again. The end's totals balance (4 reserved, 4 answered); the order does not."""
    trial = builders.Trial()
    trial.claim("w-1")
    trial.checkpoint("model.pending", "model_pending", turn=0)
    trial.iterations += 1
    for _ in range(2):  # the twin, then the held worker
        trial.model_request(0)
        trial.hit("model.returned", turn=0)
    trial.decide(0)
    trial.run_tool("call_lookup")
    trial.close_round()
    trial.checkpoint("model.pending", "model_pending", turn=1)  # the twin's, never used
    trial.iterations += 1
    trial.claim("w-1")
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    return builders.last_turn(trial)


def test_two_answers_drawn_on_one_reservation_fail_though_the_totals_balance() -> None:
    trial = two_owners_drew_on_one_reservation()
    result = budget.check(trial.build())
    second = trial.model[1]
    assert result.verdict is V.FAIL, builders.evidence(result)
    assert result.summary == (
        f"model request seq {second.seq} (turn 0) made 2 answered 200 with 1 model.pending "
        "reported before it: an inference was not reserved"
    )
    assert "4 model requests answered 200, iterations used 4" in builders.evidence(result)


def test_an_engine_that_reports_no_model_pending_is_judged_by_the_totals_alone() -> None:
    history = two_owners_drew_on_one_reservation().build()
    events = [e for e in history.events if not isinstance(e, history_module.BoundaryHit)]
    result = budget.check(history.model_copy(update={"events": events}))
    assert result.verdict is V.PASS, builders.evidence(result)
