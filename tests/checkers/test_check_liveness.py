"""run.liveness."""

from __future__ import annotations

from harness.checkers import liveness, verdict
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
