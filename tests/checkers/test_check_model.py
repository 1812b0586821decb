"""model.once_after_decision and model.count."""

from __future__ import annotations

from harness.checkers import model, verdict
from tests.checkers import builders

V = verdict.Verdict


def killed_at_model_returned(extra_calls: int = 0) -> builders.Trial:
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    builders.kill(trial, trial.last_hit())  # held at model.returned
    trial.claim("w-2")
    for _ in range(extra_calls):
        trial.model_call(1)
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    return builders.last_turn(trial)


def forgot_decision() -> builders.Trial:
    """Killed after tools.pending committed; the next worker asks the model again."""
    trial = builders.first_round(builders.Trial())
    decided = trial.model_turn(1)
    builders.kill(trial, decided)
    trial.claim("w-2")
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    return builders.last_turn(trial)


def test_clean_passes() -> None:
    history = builders.clean()
    assert model.check_once_after_decision(history).verdict is V.PASS
    assert model.check_count(history).verdict is V.PASS


def test_interrupted_model_window_allows_one_extra_call() -> None:
    history = killed_at_model_returned().build()
    assert model.check_once_after_decision(history).verdict is V.PASS
    counted = model.check_count(history)
    assert counted.verdict is V.PASS
    assert "turn 1: 2 model calls answered" in builders.evidence(counted)
    assert "allowed 2 = 1 + 1 interruption(s)" in builders.evidence(counted)
    assert "kill at model.returned#2" in builders.evidence(counted)


def test_a_model_call_after_the_committed_decision_fails() -> None:
    history = forgot_decision().build()
    result = model.check_once_after_decision(history)
    assert result.verdict is V.FAIL
    repeat = [r for r in history.model if r.turn == 1][1]
    assert f"turn 1: model request seq {repeat.seq}" in result.summary
    assert "tools.pending#2 by w-1" in result.summary


def test_once_after_decision_without_detail_uses_time_order() -> None:
    history = builders.without_detail(forgot_decision().build())
    result = model.check_once_after_decision(history)
    assert result.verdict is V.FAIL
    assert "tools.pending#2" in result.summary


def test_once_after_decision_ignores_a_turn_numbering_that_contradicts_the_ledger() -> None:
    trial = forgot_decision()
    for index, event in enumerate(trial.events):
        turn = getattr(event, "detail", {}).get("turn")
        if turn is not None:  # an engine counting turns from 1
            detail = {**event.detail, "turn": turn + 1}  # type: ignore[union-attr]
            trial.events[index] = event.model_copy(update={"detail": detail})
    result = model.check_once_after_decision(trial.build())
    assert result.verdict is V.FAIL
    assert "contradicts" in builders.evidence(result)


def test_no_decision_hit_is_inconclusive() -> None:
    history = builders.clean()
    events = [
        e
        for e in history.events
        if getattr(e, "point", None) not in ("tools.pending", "reply.ready")
    ]
    result = model.check_once_after_decision(history.model_copy(update={"events": events}))
    assert result.verdict is V.INCONCLUSIVE


def test_repeated_decision_also_breaks_the_count() -> None:
    result = model.check_count(forgot_decision().build())
    assert result.verdict is V.FAIL
    assert "turn 1: 2 model calls answered" in result.summary
    assert "allowed 1 = 1 + 0 interruption(s)" in result.summary


def test_more_calls_than_interruptions_fails() -> None:
    history = killed_at_model_returned(extra_calls=1).build()
    result = model.check_count(history)
    assert result.verdict is V.FAIL
    seqs = ", ".join(str(r.seq) for r in history.model if r.turn == 1)
    assert f"turn 1: 3 model calls answered (seq {seqs}), allowed 2" in result.summary


def test_uninterrupted_retry_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    trial.model_call(1)
    trial.decide(1)
    result = model.check_count(trial.build())
    assert result.verdict is V.FAIL
    assert "turn 1: 2 model calls answered" in result.summary


def test_a_recovery_claim_without_a_fault_counts_as_an_interruption() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    trial.claim("w-2")  # w-1's lease lapsed on its own
    trial.model_turn(1)
    result = model.check_count(trial.build())
    assert result.verdict is V.PASS
    assert "recovery run.claimed#2 by w-2" in builders.evidence(result)


def test_request_beyond_the_script_fails() -> None:
    trial = builders.clean_trial()
    trial.model_request(3, status=400, error="script exhausted: scenario 'refund' has 3 turns")
    result = model.check_count(trial.build())
    assert result.verdict is V.FAIL
    assert "asks for turn 3, beyond the script's 3 turns" in result.summary
    assert "script exhausted" in result.summary


def test_no_model_request_fails_unless_the_run_stopped_early() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.report("failed")
    result = model.check_count(trial.build())
    assert result.verdict is V.FAIL
    assert (
        "no model request at all for a scenario of 3 turns (final status failed)" in result.summary
    )
    trial.reports = []
    trial.report("budget_exhausted")
    assert model.check_count(trial.build()).verdict is V.PASS


def test_success_with_a_turn_never_answered_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.report("succeeded")
    result = model.check_count(trial.build())
    assert result.verdict is V.FAIL
    assert "turn 1: the run succeeded but the model never answered" in builders.evidence(result)


def test_a_pause_at_model_pending_allows_the_stale_workers_late_call() -> None:
    trial = builders.first_round(builders.Trial())
    pending = trial.checkpoint("model.pending", "model_pending", turn=1)
    trial.fault("pause", pending)
    trial.claim("w-2")
    trial.fault("resume", worker="w-1")
    trial.model_request(1)  # w-1's call, in flight before it was paused
    trial.model_turn(1)  # w-2's own call
    result = model.check_count(trial.build())
    assert result.verdict is V.PASS
    assert "pause at model.pending#2 worker w-1" in builders.evidence(result)


def lost_ack_at_decision(*, landed: bool) -> builders.Trial:
    """The tools.pending commit of turn 1 loses its ack; the next worker asks the model again."""
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    before = trial.hit("tools.pending:before_commit", turn=None, frontier_version=trial.version + 1)
    lost = trial.fault("commit_lost", before, observed={"xids": [742]})
    # what Postgres did with the held transaction, read by the heal
    trial.heal(lost, observed={"transaction": "committed" if landed else "aborted", "xids": [742]})
    if landed:
        trial.version += 1
        trial.phase = "tools_pending"
    trial.claim("w-2")
    trial.model_turn(1)
    return trial


def test_a_decision_whose_ack_was_lost_still_counts_as_committed() -> None:
    history = lost_ack_at_decision(landed=True).build()
    result = model.check_once_after_decision(history)
    assert result.verdict is V.FAIL
    assert "after its decision was committed at tools.pending committed under commit_lost" in (
        result.summary
    )
    assert "xid 742, committed as read from Postgres" in result.summary
    counted = model.check_count(history)
    assert counted.verdict is V.FAIL
    assert "turn 1: 2 model calls answered" in counted.summary


def test_a_lost_commit_that_did_not_land_allows_the_repeat() -> None:
    history = lost_ack_at_decision(landed=False).build()
    assert model.check_once_after_decision(history).verdict is V.PASS
    counted = model.check_count(history)
    assert counted.verdict is V.PASS
    assert "commit_lost at tools.pending:before_commit#2" in builders.evidence(counted)


def test_no_model_request_while_the_run_is_not_over_is_inconclusive() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.report("pending")
    result = model.check_count(trial.build())
    assert result.verdict is V.INCONCLUSIVE
    assert (
        result.summary == "no model request, because the run never finished (last status pending)"
    )


def slow_decision_answer(*, recall: bool) -> builders.Trial:
    """w-1's decision of turn 0 commits, but its answer crosses a slow link and arrives
    after w-2 adopted the run and asked the model for turn 1 (and, if `recall`, for turn 0
    again after the late answer)."""
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_call(0)
    trial.hit("tools.pending:before_commit", turn=0)
    decided = {"frontier_version": trial.version + 1, "phase": "tools_pending", "turn": 0}
    trial.version += 1
    trial.phase = "tools_pending"
    trial.claim("w-2")
    trial.run_tool("call_lookup")
    trial.close_round()
    trial.model_turn(1)
    trial.hit("tools.pending", worker="w-1", **decided)
    if recall:
        trial.model_request(0)
    return trial


def test_a_decision_answered_late_still_names_its_turn() -> None:
    result = model.check_once_after_decision(slow_decision_answer(recall=False).build())
    assert result.verdict is V.PASS
    evidence = builders.evidence(result)
    assert "contradicts" not in evidence
    assert "turn 0: decision at tools.pending#2 by w-1" in evidence
    assert "(by detail.turn)" in evidence


def test_a_model_call_after_a_late_answered_decision_fails() -> None:
    result = model.check_once_after_decision(slow_decision_answer(recall=True).build())
    assert result.verdict is V.FAIL
    assert "turn 0: model request seq" in result.summary


# --- a PASS states the fact it rests on ----------------------------------------------------


def decision_seqs(trial: builders.Trial) -> list[int]:
    points = ("tools.pending", "reply.ready")
    return [e.seq for e in trial.events if getattr(e, "point", None) in points]


def test_pass_names_where_each_decision_committed() -> None:
    trial = builders.clean_trial()
    first, second, third = decision_seqs(trial)
    assert model.check_once_after_decision(trial.build()).summary == (
        "decisions committed, no model call for a turn after its own: "
        f"turn 0 at hit seq {first} (tools.pending#1), turn 1 at hit seq {second} "
        f"(tools.pending#2), turn 2 at hit seq {third} (reply.ready#1)"
    )


def test_pass_of_one_decided_turn_says_no_call_came_after_it() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    trial.report("running")
    (decided,) = decision_seqs(trial)
    assert model.check_once_after_decision(trial.build()).summary == (
        f"decision for turn 0 committed at hit seq {decided} (tools.pending#1), no model call "
        "for turn 0 after it"
    )


def test_count_pass_names_calls_and_allowance_per_turn() -> None:
    assert model.check_count(killed_at_model_returned().build()).summary == (
        "model calls per turn within 1 + the interruptions of its window: turn 0 1 of 1, "
        "turn 1 2 of 2 (1 interruption), turn 2 1 of 1"
    )


def test_pass_without_a_model_answer_says_the_run_ended_as_expected() -> None:
    trial = builders.Trial(builders.refund_scenario(expect="budget_exhausted"))
    trial.claim("w-1")
    trial.finish("budget_exhausted")
    assert model.check_once_after_decision(trial.build()).summary == (
        "no model request was answered; the run ended budget_exhausted as expected"
    )


def lost_model_answer(*, twice_later: bool) -> builders.Trial:
    """The world answers turn 1, then loses the response (response_lost: no kill); the
    worker lives on and asks again, a second billed answer of the same turn."""
    trial = builders.first_round(builders.Trial())
    trial.checkpoint("model.pending", "model_pending", turn=1)
    trial.iterations += 1
    trial.model_request(1)
    hit = builders.world_hit(trial, "world:model.answered", 2, turn=1)
    trial.fault("response_lost", hit)
    trial.model_request(1)
    trial.hit("model.returned", turn=1)
    trial.decide(1)
    trial.run_tool("call_refund")
    trial.close_round()
    if twice_later:  # no fault in turn 2's window: its second call is one too many
        trial.model_request(2)
    return builders.last_turn(trial)


def test_a_lost_model_answer_allows_one_more_call_of_its_turn() -> None:
    counted = model.check_count(lost_model_answer(twice_later=False).build())
    assert counted.verdict is V.PASS
    assert "turn 1: 2 model calls answered" in builders.evidence(counted)
    assert "allowed 2 = 1 + 1 interruption(s)" in builders.evidence(counted)


def test_a_lost_model_answer_excuses_no_call_of_a_later_turn() -> None:
    # A lost response is over the moment it happens, like a kill: before, a fault nothing
    # ends counted as open forever and excused an extra call in every later window.
    counted = model.check_count(lost_model_answer(twice_later=True).build())
    assert counted.verdict is V.FAIL
    assert "turn 2: 2 model calls answered" in builders.evidence(counted)
    assert "allowed 1 = 1 + 0 interruption(s)" in builders.evidence(counted)
