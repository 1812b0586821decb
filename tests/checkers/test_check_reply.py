"""reply.single_delivery."""

from __future__ import annotations

from harness.checkers import reply, verdict
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
