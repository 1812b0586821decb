"""tool.at_least_once: a run that ends succeeded did the work its script needed."""

from __future__ import annotations

from harness import checkers
from harness.checkers import effects, verdict
from tests.checkers import builders

V = verdict.Verdict
REFUND = 'refund_order({"amount_cents":4999,"order_id":"ord-rk-7"})'
UNREACHABLE = {"status": "error", "error": "tool service unreachable: connection refused"}


def gives_up_and_claims_success() -> builders.Trial:
    """The refund's connection is refused for 0.3 s: the engine settles it failed, tells the
    model "error", and the script's reply ("refunded") follows. The world never refunded."""
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    started = trial.start_tool("call_refund")
    cut = trial.fault("tool_cut", started)
    trial.settle("call_refund", "failed", UNREACHABLE)
    trial.healed_at = trial.heal(cut).t
    trial.close_round()
    builders.last_turn(trial)
    return trial


def test_clean_passes() -> None:
    result = effects.check(builders.clean())
    assert result.verdict is V.PASS, result
    assert result.summary == (
        "run succeeded; 2 scripted call(s) each have their effect in the world, 0 excused"
    )


def test_a_run_that_claims_success_over_a_refund_that_never_happened_fails() -> None:
    result = effects.check(gives_up_and_claims_success().build())
    assert result.verdict is V.FAIL, result
    assert result.summary == (
        f"run succeeded, but {REFUND} (call 'call_refund') has 0 effect(s) in the world, "
        "1 needed: the work the script needed never happened"
    )
    assert "call_refund failed" in builders.evidence(result)


def test_no_checker_of_before_saw_the_lie() -> None:
    """Every other invariant PASSes this history: the new one is what catches it."""
    history = gives_up_and_claims_success().build()
    results = checkers.check_all(history)
    verdicts = {result.invariant: result.verdict for result in results}
    assert verdicts.pop(effects.INVARIANT) is V.FAIL
    assert set(verdicts.values()) == {V.PASS}, [r for r in results if r.verdict is not V.PASS]


def test_the_same_call_sent_again_once_the_link_healed_passes() -> None:
    """The reference engine: a refused call was not applied; it goes again, same key."""
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    started = trial.start_tool("call_refund")
    cut = trial.fault("tool_cut", started)
    trial.healed_at = trial.heal(cut).t
    trial.finish_tool("call_refund")
    trial.close_round()
    builders.last_turn(trial)
    assert effects.check(trial.build()).verdict is V.PASS


def test_an_outcome_unknown_told_to_the_model_excuses_a_missing_effect() -> None:
    """Killed after marking the refund started, before sending it: the successor cannot know,
    ends it outcome_unknown and says so. No refund happened; no lie was told."""
    trial = builders.Trial(builders.refund_scenario(refund_queryable=False))
    builders.first_round(trial)
    trial.model_turn(1)
    builders.kill(trial, trial.start_tool("call_refund"))
    trial.claim("w-2")
    trial.settle("call_refund", "outcome_unknown", builders.UNKNOWN)
    trial.close_round()
    builders.last_turn(trial)
    result = effects.check(trial.build())
    assert result.verdict is V.PASS, result
    assert "1 excused" in result.summary
    assert f"call 'call_refund' {REFUND}: not required, the engine reports it outcome_unknown" in (
        builders.evidence(result)
    )


def test_a_rejected_call_is_excused() -> None:
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    trial.settle("call_refund", "rejected", {"status": "error", "error": "rejected"})
    trial.close_round()
    builders.last_turn(trial)
    assert effects.check(trial.build()).verdict is V.PASS


def test_a_call_the_world_refused_for_good_is_excused() -> None:
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    trial.start_tool("call_refund")
    trial.tool_request("call_refund", outcome="rejected")
    trial.settle("call_refund", "failed", {"status": "error", "error": "400 bad arguments"})
    trial.close_round()
    builders.last_turn(trial)
    assert effects.check(trial.build()).verdict is V.PASS


def test_two_equal_calls_need_two_effects() -> None:
    """The same reminder posted twice: one effect is half the work."""
    trial = builders.Trial(builders.reminder_scenario())
    trial.claim("w-1")
    trial.model_turn(0)
    trial.run_tool("call_remind")
    trial.close_round()
    trial.model_turn(1)
    trial.start_tool("call_nudge")
    trial.settle("call_nudge", "failed", UNREACHABLE)
    trial.close_round()
    trial.model_turn(2)
    trial.deliver()
    trial.finish()
    result = effects.check(trial.build())
    assert result.verdict is V.FAIL
    assert "(call 'call_remind', 'call_nudge') has 1 effect(s) in the world, 2 needed" in (
        result.summary
    )


def test_a_run_that_ends_as_expected_without_success_claims_nothing() -> None:
    trial = gives_up_and_claims_success()
    trial.reports[-1] = trial.reports[-1].model_copy(update={"status": "failed"})
    trial.scenario = trial.scenario.model_copy(
        update={"expect": trial.scenario.expect.model_copy(update={"status": "failed"})}
    )
    result = effects.check(trial.build())
    assert result.verdict is V.PASS
    assert result.summary == "the run ended failed, no claim that its work was done"


def test_an_unexpected_ending_proves_nothing_here() -> None:
    """Failed where success was expected: run.liveness's FAIL; nothing for this one."""
    trial = gives_up_and_claims_success()
    trial.reports[-1] = trial.reports[-1].model_copy(update={"status": "failed"})
    result = effects.check(trial.build())
    assert result.verdict is V.INCONCLUSIVE
    assert "the run ended failed, not succeeded" in result.summary


def test_a_fault_that_never_healed_leaves_a_missing_effect_unjudged() -> None:
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    trial.fault("tool_cut", trial.start_tool("call_refund"))
    trial.settle("call_refund", "failed", UNREACHABLE)
    trial.close_round()
    builders.last_turn(trial)
    result = effects.check(trial.build())
    assert result.verdict is V.INCONCLUSIVE
    assert result.summary.startswith("a fault never healed")


def test_a_run_that_never_finished_is_not_judged() -> None:
    trial = builders.first_round(builders.Trial())
    trial.report("running")
    assert effects.check(trial.build()).verdict is V.INCONCLUSIVE


def test_a_fault_that_never_healed_does_not_matter_when_the_work_was_done() -> None:
    trial = builders.Trial()
    builders.first_round(trial)
    trial.model_turn(1)
    trial.fault("pause", trial.start_tool("call_refund"))  # never resumed: no record
    trial.finish_tool("call_refund")
    trial.close_round()
    builders.last_turn(trial)
    assert effects.check(trial.build()).verdict is V.PASS
