"""reply.single_delivery."""

from __future__ import annotations

from harness.checkers import reply, verdict
from harness.record import history
from harness.world import ledger
from tests.checkers import builders

V = verdict.Verdict


def delivered_then(status: str, *, deliveries: int, sink_queryable: bool) -> builders.Trial:
    """Through reply.ready, `deliveries` deliveries, then a final report with `status`."""
    trial = builders.Trial(builders.refund_scenario(sink_queryable=sink_queryable))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    trial.checkpoint("reply.sending", None)
    for _ in range(deliveries):
        trial.delivery()
    trial.report(status)
    return trial


def test_clean_passes() -> None:
    result = reply.check(builders.clean())
    assert result.verdict is V.PASS
    assert "1 deliveries of this run's reply" in builders.evidence(result)


def test_a_second_delivery_fails() -> None:
    trial = delivered_then("succeeded", deliveries=2, sink_queryable=True)
    seqs = [entry.seq for entry in trial.sink if entry.kind == "reply.delivery"]
    result = reply.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"the reply was delivered 2 times (expected at most 1): seq {seqs[0]} key 'reply-run-1', "
        f"seq {seqs[1]} key 'reply-run-1'"
    )


def test_success_without_a_delivery_fails() -> None:
    result = reply.check(delivered_then("succeeded", deliveries=0, sink_queryable=True).build())
    assert result.verdict is V.FAIL
    assert result.summary == "the run says succeeded but the sink has no delivery of its reply"


def test_uncertain_delivery_is_allowed_when_the_sink_cannot_be_asked() -> None:
    for count in (0, 1):
        trial = delivered_then("delivery_uncertain", deliveries=count, sink_queryable=False)
        assert reply.check(trial.build()).verdict is V.PASS


def test_uncertain_delivery_with_a_queryable_sink_fails() -> None:
    result = reply.check(
        delivered_then("delivery_uncertain", deliveries=1, sink_queryable=True).build()
    )
    assert result.verdict is V.FAIL
    assert "delivery_uncertain although the sink can be asked by key (1 deliveries)" in (
        result.summary
    )


def test_two_deliveries_fail_even_when_uncertain() -> None:
    trial = delivered_then("delivery_uncertain", deliveries=2, sink_queryable=False)
    assert reply.check(trial.build()).verdict is V.FAIL


def test_without_run_id_deliveries_are_matched_by_content() -> None:
    trial = delivered_then("succeeded", deliveries=0, sink_queryable=True)
    trial.delivery(run_id=None)
    trial.delivery(run_id=None)
    trial.delivery(run_id=None, content="another run's reply")
    result = reply.check(trial.build())
    assert result.verdict is V.FAIL
    assert "delivered 2 times" in result.summary


def test_no_report_is_inconclusive() -> None:
    trial = builders.clean_trial()
    trial.reports = []
    assert reply.check(trial.build()).verdict is V.INCONCLUSIVE


def test_a_paused_sender_racing_the_recovery_is_named_in_the_evidence() -> None:
    trial = builders.first_round(builders.Trial())
    builders.refund_round(trial)
    trial.model_turn(2)
    trial.fault("pause", trial.checkpoint("reply.sending", None))
    trial.claim("w-2")
    trial.delivery()  # w-2 resends after asking the sink
    trial.fault("resume", worker="w-1")
    trial.delivery()  # w-1's send, in flight since before the pause
    trial.report("succeeded")
    result = reply.check(trial.build())
    assert result.verdict is V.FAIL
    assert "delivered 2 times" in result.summary
    assert "fault in the delivery window: pause at reply.sending#1 worker w-1" in (
        builders.evidence(result)
    )
    assert "its send may still be in flight" in builders.evidence(result)


# --- a sink that cannot be asked: never a blind resend after a fault in the window ------


def held_at_reply_sending(
    action: str, *, sink_queryable: bool = False
) -> tuple[builders.Trial, history.FaultApplied]:
    """Through reply.ready; `action` strikes the worker held at reply.sending (committed)."""
    trial = builders.Trial(builders.refund_scenario(sink_queryable=sink_queryable))
    builders.first_round(trial)
    builders.refund_round(trial)
    trial.model_turn(2)
    sending = trial.checkpoint("reply.sending", None)
    if action == "kill":
        kill = trial.fault("kill", sending)
        trial.worker_event("exited", "w-1")
        return trial, kill
    return trial, trial.fault(action, sending)


def test_a_blind_resend_after_a_kill_at_reply_sending_fails_with_one_delivery() -> None:
    # The first POST never left, so the sink took the reply once: the count alone passes.
    trial, kill = held_at_reply_sending("kill")
    trial.claim("w-2")
    trial.delivery()  # sent again without knowing whether the first one arrived
    trial.report("succeeded")
    posted = next(entry for entry in trial.sink if entry.kind == "reply.request")
    result = reply.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        f"reply POST seq {posted.seq} (key 'reply-run-1') after kill at reply.sending#1 worker "
        f"w-1 (fault seq {kill.seq}, t={kill.t:.3f}) struck inside the delivery window: the "
        "sink cannot be asked, so a recovering worker must end the run delivery_uncertain, "
        "never resend blindly"
    )


def test_asking_the_sink_that_cannot_answer_then_ending_uncertain_passes() -> None:
    trial, _ = held_at_reply_sending("kill")
    trial.claim("w-2")
    trial.reply_query()
    trial.report("delivery_uncertain")
    assert reply.check(trial.build()).verdict is V.PASS


def test_a_resend_after_asking_a_queryable_sink_passes() -> None:
    trial, _ = held_at_reply_sending("kill", sink_queryable=True)
    trial.claim("w-2")
    assert not trial.reply_query().found
    trial.delivery()
    trial.report("succeeded")
    assert reply.check(trial.build()).verdict is V.PASS


def test_the_cut_off_workers_own_first_post_is_not_a_resend() -> None:
    # Its database was cut while it held reply.sending; healed, it posts as it meant to.
    trial, cut = held_at_reply_sending("db_cut")
    trial.heal(cut)
    trial.delivery()
    trial.report("succeeded")
    result = reply.check(trial.build())
    assert result.verdict is V.PASS, result.summary
    assert "may be the interrupted worker's own first send" in builders.evidence(result)


def test_a_post_while_the_sender_is_paused_is_a_resend() -> None:
    # Stopped at reply.sending, the worker cannot post until it resumes: this is another's.
    trial, _ = held_at_reply_sending("pause")
    trial.claim("w-2")
    trial.delivery()
    trial.report("succeeded")
    trial.fault("resume", worker="w-1")
    result = reply.check(trial.build())
    assert result.verdict is V.FAIL
    assert "after pause at reply.sending#1 worker w-1" in result.summary
    assert "never resend blindly" in result.summary


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_names_the_one_delivery_by_key_and_seq() -> None:
    trial = builders.clean_trial()
    (delivered,) = (entry for entry in trial.sink if entry.kind == "reply.delivery")
    assert reply.check(trial.build()).summary == (
        f"delivered once, key 'reply-run-1', seq {delivered.seq}; sink queryable, status succeeded"
    )


def test_pass_of_an_uncertain_delivery_says_there_was_no_resend() -> None:
    trial = delivered_then("delivery_uncertain", deliveries=0, sink_queryable=False)
    assert reply.check(trial.build()).summary == (
        "never delivered; the run ended delivery_uncertain, the sink cannot be asked: no resend"
    )


def test_a_refused_foreign_reply_is_named_in_the_evidence_and_the_verdict_stands() -> None:
    """Another local user posted the reply without the trial's secret: the world refused it
    and kept it apart (harness/world/auth.py). One delivery is the engine's: PASS, and the
    evidence says a foreign request was refused."""
    forged = ledger.ForeignRequest(seq=1, t=1.0, service="sink", method="POST", path="/replies")
    result = reply.check(builders.clean().model_copy(update={"foreign": [forged]}))
    assert result.verdict is V.PASS
    assert "1 foreign request(s) to the sink refused" in builders.evidence(result)
    assert "POST /replies" in builders.evidence(result)
