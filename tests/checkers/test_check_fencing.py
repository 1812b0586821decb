"""lease.fencing."""

from __future__ import annotations

from harness.checkers import fencing, verdict
from harness.scenario import schema
from tests.checkers import builders

V = verdict.Verdict


def paused_then_taken_over() -> builders.Trial:
    """w-1 is paused at tools.pending of turn 1; w-2 claims the run and moves on."""
    trial = builders.first_round(builders.Trial())
    trial.fault("pause", trial.model_turn(1))
    trial.claim("w-2")
    trial.run_tool("call_refund")
    return trial


def test_clean_passes_without_handover() -> None:
    result = fencing.check(builders.clean())
    assert result.verdict is V.PASS
    assert result.evidence[0] == "no lease handover happened"


def test_handover_from_a_dead_worker_passes() -> None:
    trial = builders.first_round(builders.Trial())
    builders.kill(trial, trial.model_turn(1))
    claim = trial.claim("w-2")
    trial.run_tool("call_refund")
    result = fencing.check(trial.build())
    assert result.verdict is V.PASS
    assert f"handover from w-1 (gone) to w-2 at run.claimed#2 by w-2 (hit seq {claim.seq}" in (
        builders.evidence(result)
    )


def test_a_stale_worker_committing_after_the_takeover_fails() -> None:
    trial = paused_then_taken_over()
    trial.fault("resume", worker="w-1")
    trial.worker = "w-1"
    stale = trial.checkpoint("tool.started", None, tool_call_id="call_refund")
    result = fencing.check(trial.build())
    assert result.verdict is V.FAIL
    claim = next(
        e for e in trial.events if getattr(e, "point", "") == "run.claimed" and e.worker_id == "w-2"
    )
    assert result.summary == (
        f"w-1 committed tool.started#{stale.occurrence} by w-1 (hit seq {stale.seq}, "
        f"t={stale.t:.3f}) after losing its lease at run.claimed#2 by w-2 "
        f"(hit seq {claim.seq}, t={claim.t:.3f})"
    )
    assert "in-flight remote calls are not fenceable" in builders.evidence(result)


def test_a_stale_workers_before_commit_hit_is_not_a_commit() -> None:
    trial = paused_then_taken_over()
    trial.fault("resume", worker="w-1")
    trial.hit("tool.started:before_commit", worker="w-1", tool_call_id="call_refund")
    trial.tool_request("call_refund")  # its remote call in flight: not judged here
    result = fencing.check(trial.build())
    assert result.verdict is V.PASS
    assert "w-1 lost its lease to w-2" in builders.evidence(result)
    assert "in-flight remote calls are not fenceable" in builders.evidence(result)


def test_a_worker_that_claims_again_may_commit() -> None:
    trial = paused_then_taken_over()
    builders.kill(trial, trial.last_hit())
    trial.fault("resume", worker="w-1")
    trial.claim("w-1")
    trial.close_round()
    assert fencing.check(trial.build()).verdict is V.PASS


def test_engine_events_after_the_takeover_fail() -> None:
    trial = paused_then_taken_over()
    trial.engine_tables = {
        "events": [
            {
                "id": 1,
                "run_id": builders.RUN_ID,
                "kind": "run.claimed",
                "worker_id": "w-1",
                "lease_epoch": 1,
            },
            {
                "id": 2,
                "run_id": builders.RUN_ID,
                "kind": "tools.pending",
                "worker_id": "w-1",
                "lease_epoch": 1,
            },
            {
                "id": 3,
                "run_id": builders.RUN_ID,
                "kind": "run.claimed",
                "worker_id": "w-2",
                "lease_epoch": 2,
            },
            {
                "id": 4,
                "run_id": builders.RUN_ID,
                "kind": "tool.settled",
                "worker_id": "w-1",
                "lease_epoch": 1,
            },
            {
                "id": 5,
                "run_id": "other-run",
                "kind": "tool.settled",
                "worker_id": "w-1",
                "lease_epoch": 1,
            },
        ]
    }
    result = fencing.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary == (
        "event id 4 kind tool.settled by w-1 (lease_epoch 1) written after w-1 lost its lease "
        "at event id 3 kind run.claimed by w-2 (lease_epoch 2)"
    )


def slow_ack_after_takeover() -> tuple[builders.Trial, dict[str, object]]:
    """w-1 sends the COMMIT of turn 1's decision over a slow link; the answer comes back
    only after w-2 claimed the run (the lease lapsed meanwhile) and moved on."""
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    trial.hit("tools.pending:before_commit", turn=1)
    trial.fault("latency", trial.last_hit())
    decided = {"frontier_version": trial.version + 1, "phase": "tools_pending", "turn": 1}
    trial.version += 1
    trial.phase = "tools_pending"
    trial.claim("w-2")
    trial.run_tool("call_refund")
    return trial, decided


def test_a_commit_in_flight_at_the_takeover_is_not_judged_from_hits() -> None:
    trial, decided = slow_ack_after_takeover()
    late = trial.hit("tools.pending", worker="w-1", **decided)  # the late acknowledgement
    result = fencing.check(trial.build())
    assert result.verdict is V.PASS
    assert (
        f"w-1's COMMIT of tools.pending#2 by w-1 (hit seq {late.seq}, t={late.t:.3f}) was in "
        "flight when run.claimed#2 by w-2" in builders.evidence(result)
    )


def test_a_commit_sent_after_the_takeover_still_fails() -> None:
    trial, _ = slow_ack_after_takeover()
    trial.worker = "w-1"
    trial.checkpoint("model.ready", "model_ready")  # its next transition: COMMIT sent late
    result = fencing.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("w-1 committed model.ready#")


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_without_a_handover_says_no_worker_lost_its_lease() -> None:
    assert fencing.check(builders.clean()).summary == (
        "no lease handover happened: no worker lost its lease"
    )


def test_pass_names_the_takeover_and_that_nothing_was_committed_after_it() -> None:
    trial = paused_then_taken_over()
    claim = next(
        e for e in trial.events if getattr(e, "point", "") == "run.claimed" and e.worker_id == "w-2"
    )
    assert fencing.check(trial.build()).summary == (
        f"w-1 lost its lease to w-2 at run.claimed#2 (hit seq {claim.seq}) and committed "
        "nothing after it"
    )


def test_pass_after_a_kill_says_the_old_holder_was_gone() -> None:
    trial = builders.first_round(builders.Trial())
    builders.kill(trial, trial.model_turn(1))
    claim = trial.claim("w-2")
    assert fencing.check(trial.build()).summary == (
        f"w-1 was gone when w-2 claimed at run.claimed#2 (hit seq {claim.seq})"
    )


def dead_letter_at_the_limit(*, kill_holder: bool = True, attempts: int = 3) -> builders.Trial:
    """dead_letter (3 attempts), `kill@run.claimed#3`: every attempt's inference is answered
    500, which ends the attempt; w-1 and w-2 take turns; w-1 is killed as it claims the
    third time; w-2, alive all along, finds the lease lapsed at the limit and ends the run
    dead_lettered without a fourth claim."""
    trial = builders.Trial(schema.find("dead_letter"))
    for attempt in range(attempts):
        claim = trial.claim("w-1" if attempt % 2 == 0 else "w-2")
        if attempt < attempts - 1:
            trial.checkpoint("model.pending", "model_pending", turn=1)
            trial.model_request(1, status=500)
    if kill_holder:
        builders.kill(trial, claim)
    trial.worker = "w-1" if claim.worker_id == "w-2" else "w-2"  # the other one survives
    trial.checkpoint("run.finished", None, status="dead_lettered")
    trial.report("dead_lettered", attempts=attempts)
    return trial


def test_the_survivor_dead_lettering_a_lapsed_run_at_its_limit_is_no_stale_commit() -> None:
    result = fencing.check(dead_letter_at_the_limit().build())
    assert result.verdict is V.PASS, result
    assert "w-2 ended the run dead_lettered at run.finished#1 by w-2" in builders.evidence(result)
    assert "after all 3 attempts, without a claim, while w-1's lease lapsed" in (
        builders.evidence(result)
    )


def test_dead_lettering_a_run_whose_holder_is_alive_and_well_is_a_stale_commit() -> None:
    result = fencing.check(dead_letter_at_the_limit(kill_holder=False).build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("w-2 committed run.finished#1 by w-2")


def test_dead_lettering_before_the_limit_is_a_stale_commit() -> None:
    """Two attempts of three: the run is to be claimed again, not finished by a fenced worker."""
    result = fencing.check(dead_letter_at_the_limit(attempts=2).build())
    assert result.verdict is V.FAIL
    assert "committed run.finished#1 by w-1" in result.summary


def test_a_paused_holder_fenced_by_the_dead_letter_may_commit_nothing_after_it() -> None:
    trial = builders.Trial(schema.find("dead_letter"))
    for worker in ("w-1", "w-2"):
        trial.claim(worker)
        trial.checkpoint("model.pending", "model_pending", turn=1)
        trial.model_request(1, status=500)
    paused = trial.fault("pause", trial.claim("w-1"))
    trial.worker = "w-2"
    trial.checkpoint("run.finished", None, status="dead_lettered")
    trial.fault("resume", worker="w-1")
    trial.worker = "w-1"
    stale = trial.checkpoint("model.pending", "model_pending", turn=1)
    trial.report("dead_lettered", attempts=3)
    result = fencing.check(trial.build())
    assert paused.worker_id == "w-1"
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        f"w-1 committed model.pending#3 by w-1 (hit seq {stale.seq}"
    ), result.summary
    assert "after losing its lease at run.finished#1 by w-2" in result.summary


def _claims_heard_out_of_order() -> builders.Trial:
    """Literal from a certify of the reference engine (ff48a58; sink_no_query under
    commit_dropped@tools.pending:before_commit#1, 8 trials at once on 2 cores): w-1's COMMIT
    was dropped, w-2 claimed under epoch 2 and stalled 430 ms before its report; its lease
    lapsed, w-1 claimed under epoch 3 and was heard first, then w-2's claim arrived."""
    trial = builders.Trial()
    trial.worker = "w-1"
    trial.hit("run.claimed", lease_epoch=1)
    trial.checkpoint("model.pending", "model_pending", turn=0)
    trial.model_request(0)
    trial.hit("model.returned", turn=0)
    trial.hit("tools.pending:before_commit")
    trial.fault("commit_dropped", trial.last_hit())
    trial.hit("run.claimed", lease_epoch=3)
    trial.hit("run.claimed", worker="w-2", lease_epoch=2)
    return trial


def test_a_claim_heard_after_a_newer_epoch_takes_the_lease_from_nobody() -> None:
    trial = _claims_heard_out_of_order()
    trial.worker = "w-1"
    trial.checkpoint("model.pending", "model_pending", turn=0)
    trial.finish()
    result = fencing.check(trial.build())
    assert result.verdict is V.PASS, result.summary
    assert "names lease_epoch 2, below 3 of run.claimed#2 by w-1" in builders.evidence(result)


def test_the_superseded_claimer_committing_afterwards_fails() -> None:
    trial = _claims_heard_out_of_order()
    trial.worker = "w-2"
    stale = trial.checkpoint("model.pending", "model_pending", turn=0)
    trial.worker = "w-1"
    trial.finish()
    result = fencing.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        f"w-2 committed model.pending#2 by w-2 (hit seq {stale.seq}"
    ), result.summary
    assert "after losing its lease at run.claimed#2 by w-1" in result.summary


def test_without_epochs_the_claims_count_in_the_order_heard() -> None:
    """An engine that names no epoch: the later report is the newer claim (it cannot be
    told otherwise), so w-1, fenced by it, committing afterwards fails."""
    trial = _claims_heard_out_of_order()
    trial.worker = "w-1"
    trial.checkpoint("model.pending", "model_pending", turn=0)
    trial.finish()
    result = fencing.check(builders.without_detail(trial.build()))
    assert result.verdict is V.FAIL
    assert "after losing its lease at run.claimed#3 by w-2" in result.summary
