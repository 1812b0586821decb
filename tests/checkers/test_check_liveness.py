"""run.liveness."""

from __future__ import annotations

from harness.checkers import handovers, liveness, verdict
from tests.checkers import builders

V = verdict.Verdict


def test_clean_passes() -> None:
    result = liveness.check(builders.clean())
    assert result.verdict is V.PASS
    assert "status succeeded as expected" in builders.evidence(result)


def test_not_terminal_is_hung() -> None:
    trial = builders.first_round(builders.Trial())
    trial.report("running")
    result = liveness.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        "hung: not terminal at the end (last status running, frontier phase model_ready v3)"
    )


def test_not_terminal_with_the_database_cut_says_so() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    cut = trial.fault("db_cut", trial.last_hit())  # held at model.returned
    trial.report("running")
    result = liveness.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("waiting for the database: not terminal (last status running")
    assert f"db_cut at model.returned#2 worker w-1 (fault seq {cut.seq}" in result.summary


def test_healed_database_is_not_blamed() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    trial.fault("db_cut", trial.last_hit())
    trial.fault("heal", worker="w-1")
    trial.report("running")
    assert liveness.check(trial.build()).summary.startswith("hung:")


def test_too_slow_after_the_heal_fails() -> None:
    trial = builders.clean_trial(builders.refund_scenario(deadline_s=1.0))
    trial.healed_at = 0.5
    result = liveness.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("terminal ")
    assert "s after the last heal (deadline 1s)" in result.summary


def test_unexpected_status_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.report("dead_lettered", reason="max attempts")
    trial.finished_at = trial.now
    result = liveness.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == "status dead_lettered (reason 'max attempts'), expected succeeded"


def test_uncertain_delivery_is_accepted_after_a_fault_in_the_delivery_window() -> None:
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    sending = trial.checkpoint("reply.sending", None)
    builders.kill(trial, sending)
    trial.claim("w-2")
    trial.finish("delivery_uncertain")
    result = liveness.check(trial.build())
    assert result.verdict is V.PASS
    assert "a fault struck in the delivery window (kill at reply.sending#1" in (
        builders.evidence(result)
    )


def test_uncertain_delivery_is_accepted_after_a_kill_before_the_delivery_is_recorded() -> None:
    # The sink took the reply (reply.sent), then the worker died before the transaction
    # recording the delivery committed: without query-by-key nobody can know it arrived.
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    trial.checkpoint("reply.sending", None)
    trial.hit("reply.sent")
    held = trial.hit("run.finished:before_commit")
    builders.kill(trial, held)
    trial.claim("w-2")
    trial.finish("delivery_uncertain")
    result = liveness.check(trial.build())
    assert result.verdict is V.PASS, builders.evidence(result)


def test_uncertain_delivery_after_a_kill_before_sending_began_fails() -> None:
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    held = trial.hit("reply.sending:before_commit")
    builders.kill(trial, held)
    trial.claim("w-2")
    trial.finish("delivery_uncertain")
    assert liveness.check(trial.build()).verdict is V.FAIL


def held_at_the_sending_mark(*, landed: str | None) -> builders.Trial:
    """A fault holds w-1 at reply.sending:before_commit; w-2 adopts and ends uncertain.

    `landed`: how the harness learnt that the sending mark committed all the same: its
    answer came back late ("late answer"), or Postgres said so after a lost ack ("xid").
    """
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    held = trial.hit("reply.sending:before_commit")
    action = "commit_lost" if landed == "xid" else "latency"
    fault = trial.fault(action, held)
    trial.claim("w-2")
    if landed == "late answer":
        trial.hit("reply.sending", worker="w-1")
    transaction = "committed" if landed == "xid" else "aborted"
    trial.heal(fault, observed={"transaction": transaction, "xids": [9]})
    trial.finish("delivery_uncertain")
    return trial


def test_uncertain_delivery_is_accepted_when_a_held_sending_mark_committed_anyway() -> None:
    for landed in ("late answer", "xid"):
        result = liveness.check(held_at_the_sending_mark(landed=landed).build())
        assert result.verdict is V.PASS, (landed, builders.evidence(result))
        assert "a fault struck in the delivery window" in builders.evidence(result)


def test_uncertain_delivery_after_a_held_sending_mark_that_never_committed_fails() -> None:
    assert liveness.check(held_at_the_sending_mark(landed=None).build()).verdict is V.FAIL


def test_uncertain_delivery_without_a_delivery_fault_fails() -> None:
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    trial.finish("delivery_uncertain")
    assert liveness.check(trial.build()).verdict is V.FAIL


def test_harness_error_is_an_error() -> None:
    trial = builders.clean_trial()
    trial.harness_error = "postgres would not start"
    result = liveness.check(trial.build())
    assert result.verdict is V.ERROR
    assert "postgres would not start" in builders.evidence(result)


def test_no_report_fails() -> None:
    trial = builders.clean_trial()
    trial.reports = []
    assert liveness.check(trial.build()).summary == "hung: the run never produced a report"


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_names_the_status_and_the_time_against_the_deadline() -> None:
    trial = builders.clean_trial()
    trial.healed_at = 1.0
    finished = trial.finished_at
    assert finished is not None
    assert liveness.check(trial.build()).summary == (
        f"status succeeded as expected; terminal {finished - 1.0:.3f}s after the last heal, "
        "within the 20s deadline"
    )


def handed_over_while_sending() -> builders.Trial:
    """openclaw_22780 under pause@reply.ready#1 in a certify at 8 trials on 2 cores: w-1 is
    paused at reply.ready, w-2 claims and commits reply.sending, then stalls past its lease
    (load, no fault) and the resumed w-1 claims: nobody can tell whether the reply went out."""
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    ready = trial.model_turn(2)
    trial.fault("pause", ready)
    trial.claim("w-2")
    trial.checkpoint("reply.sending", None)
    trial.fault("resume", worker="w-1")
    trial.claim("w-1")
    trial.finish("delivery_uncertain")
    return trial


def test_uncertain_delivery_is_accepted_after_a_handover_no_fault_planned_in_the_window() -> None:
    result = liveness.check(handed_over_while_sending().build())
    assert result.verdict is V.PASS, builders.evidence(result)
    assert result.summary.startswith(
        "status delivery_uncertain instead of succeeded: the lease changed hands at "
        "run.claimed#3 by w-1"
    )
    assert "with the run at reply.sending#1 by w-2" in result.summary
    assert "(no fault planned), inside the delivery window" in result.summary


def test_uncertain_delivery_after_a_handover_before_the_window_fails() -> None:
    """The handover the pause made happened at reply.ready: the new holder knew nothing
    was sent, and must not end uncertain."""
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.fault("pause", trial.model_turn(2))
    trial.claim("w-2")
    trial.finish("delivery_uncertain")
    assert liveness.check(trial.build()).verdict is V.FAIL


def reserved_again(*, unplanned: bool, kills: int = 1, iterations: int = 4) -> builders.Trial:
    """pydantic_ai_6979 under kill@model.pending#1 in the same certify: the kill costs turn
    0 an iteration; w-2 then stalls past its lease between turn 1's answer and its
    decision (load, no fault), claims the run again and reserves turn 1 again; the
    budget (4 for 3 turns) runs out before turn 2. `unplanned=False`: the same repeat
    with no handover before it."""
    trial = builders.Trial(builders.refund_scenario(iterations=iterations))
    trial.claim("w-1")
    for worker in ("w-2", "w-3")[:kills]:
        pending = trial.checkpoint("model.pending", "model_pending", turn=0)
        trial.iterations += 1
        builders.kill(trial, pending)
        trial.claim(worker)
    trial.model_turn(0)
    trial.run_tool("call_lookup")
    trial.close_round()
    trial.model_call(1)
    trial.hit("tools.pending:before_commit")  # its commit fenced: the lease was gone
    if unplanned:
        trial.claim(trial.worker)
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    trial.finish("budget_exhausted")
    return trial


def test_budget_spent_on_a_handover_no_fault_planned_is_accepted() -> None:
    result = liveness.check(reserved_again(unplanned=True).build())
    assert result.verdict is V.PASS, builders.evidence(result)
    assert result.summary.startswith(
        "status budget_exhausted instead of succeeded: the iteration budget (4 for 3 scripted "
        "turns) went to 2 repeated model.pending, 1 after a handover no fault planned (the "
        "lease changed hands at run.claimed#3 by w-2"
    )


def test_budget_exhausted_without_a_handover_fails() -> None:
    result = liveness.check(reserved_again(unplanned=False).build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("status budget_exhausted")


def test_budget_exhausted_where_the_planned_faults_alone_overrun_it_fails() -> None:
    """Two kills at model.pending already cost the 4-iteration budget its room for the
    script: the handover no fault planned is not why the run stopped short."""
    result = liveness.check(reserved_again(unplanned=True, kills=2).build())
    assert result.verdict is V.FAIL


def test_a_kill_recorded_after_the_claim_it_caused_is_planned() -> None:
    """The standby claims a killed worker's run the moment its session ends, often before
    the harness has recorded the kill: the handover is still the kill's. Two such kills
    cost turn 1 two repeats, which a budget of 4 for 3 turns cannot absorb whatever the
    lapse after them did: the run's exhaustion is the plan's, not the load's."""
    trial = builders.Trial(builders.refund_scenario(iterations=4))
    builders.first_round(trial)
    for standby in ("w-2", "w-3"):
        pending = trial.checkpoint("model.pending", "model_pending", turn=1)
        trial.iterations += 1
        trial.claim(standby)
        trial.fault("kill", pending)  # recorded after the claim it caused
    trial.model_call(1)
    trial.hit("tools.pending:before_commit")
    trial.claim("w-3")  # a lapse: nothing planned
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    trial.finish("budget_exhausted")
    found = handovers.handovers(trial.build())
    assert [h.planned is not None for h in found] == [True, True, False]
    assert liveness.check(trial.build()).verdict is V.FAIL
