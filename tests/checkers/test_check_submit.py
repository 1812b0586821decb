"""run.single_submit: one run, one reply, per run key, whatever the client resubmits."""

from __future__ import annotations

from typing import Any

from harness import checkers
from harness.checkers import levels, submit, verdict
from harness.faults import spec
from harness.record import history
from harness.record import resubmit as resubmit_module
from harness.world import ledger
from tests.checkers import builders

V = verdict.Verdict


def resubmit(trial: builders.Trial, when: str, *, answered: str, ok: bool = True) -> None:
    """The harness's record of `submit_twice@run?when=...` (harness/record/resubmit.py)."""
    seq, t = trial.tick()
    step = spec.parse(f"submit_twice@run?when={when}")
    observed: dict[str, Any] = {"run_id": answered, "first_run_id": builders.RUN_ID}
    trial.events.append(
        history.FaultApplied(
            seq=seq,
            t=t,
            action=resubmit_module.ACTION,
            planned=step,
            ok=ok,
            observed=observed if ok else {},
        )
    )


def test_without_a_resubmit_it_passes() -> None:
    result = submit.check(builders.clean())
    assert result.verdict is V.PASS
    assert result.summary == "submitted once: nothing resubmitted in this trial"


def test_resubmits_answering_the_one_run_pass() -> None:
    trial = builders.Trial()
    resubmit(trial, "at_once", answered=builders.RUN_ID)
    builders.last_turn(builders.refund_round(builders.first_round(trial)))
    resubmit(trial, "after_finish", answered=builders.RUN_ID)
    result = submit.check(trial.build())
    assert result.verdict is V.PASS, result
    assert "2 resubmit(s) of run key rk-7 answered its one run run-1" == result.summary


def test_a_second_run_for_the_key_fails_with_its_reply() -> None:
    trial = builders.clean_trial()
    resubmit(trial, "after_finish", answered="run-2")
    trial.model_call(0)  # the second run asks the model from the start ...
    trial.delivery(key="reply-run-2", run_id="run-2")  # ... and replies again
    result = submit.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith(
        "a second run for run key rk-7: submit_twice@run#1?when=after_finish"
    )
    text = builders.evidence(result)
    assert "answered run run-2, the first submit created run run-1" in text
    assert "the model was asked 1 time(s) for run key rk-7 after it finished" in text
    assert "reply(ies) delivered by a second run of run key rk-7" in text


def test_a_finished_run_reopened_under_its_own_id_fails() -> None:
    """The same run id answered, but the run ran again: a second conversation and reply."""
    trial = builders.clean_trial()
    resubmit(trial, "after_finish", answered=builders.RUN_ID)
    trial.model_call(0)
    trial.delivery()
    result = submit.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("the model was asked 1 time(s) for run key rk-7")


def test_a_refused_resubmit_is_not_a_failure() -> None:
    trial = builders.clean_trial()
    resubmit(trial, "at_once", answered="", ok=False)
    assert submit.check(trial.build()).verdict is V.PASS


def test_registered_and_required_for_crash_safe() -> None:
    assert submit.INVARIANT in checkers.INVARIANTS
    assert submit.INVARIANT in levels.spec(levels.Level.CRASH_SAFE).requires


def test_a_resubmit_excuses_no_extra_model_call() -> None:
    """A resubmit interrupts no worker: it opens no window where a repeat is allowed."""
    trial = builders.Trial()
    resubmit(trial, "at_once", answered=builders.RUN_ID)
    trial.claim("w-1")
    trial.model_call(0)  # asked twice for one turn, no worker interrupted
    trial.model_turn(0)
    trial.run_tool("call_lookup")
    trial.close_round()
    builders.last_turn(builders.refund_round(trial))
    result = checkers.check_all(trial.build(), only=["model.count"])[0]
    assert result.verdict is V.FAIL, result


REUSED = f"{builders.RUN_KEY}-reused"
NEW_ANSWER = f"Order ord-{REUSED} ships tomorrow."


def reused_key(trial: builders.Trial, *, answered: str = "run-2") -> None:
    """The run is purged, then a new request is submitted under its key (retention.py)."""
    for do in ("purge", "reuse_key"):
        seq, t = trial.tick()
        fields: dict[str, Any] = {"run_id": answered, "world_key": REUSED} if do != "purge" else {}
        trial.events.append(
            history.ActionTaken(seq=seq, t=t, do=do, at="run.finished", requested_seq=seq, **fields)
        )


def answer_new_request(trial: builders.Trial) -> None:
    seq, t = trial.tick()
    trial.model.append(
        ledger.ModelRequest(
            seq=seq,
            t=t,
            run_key=REUSED,
            turn=0,
            messages=[],
            status_code=200,
            response={"role": "assistant", "content": NEW_ANSWER},
        )
    )


def test_a_new_request_after_a_purge_answered_anew_passes() -> None:
    trial = builders.clean_trial()
    reused_key(trial)
    answer_new_request(trial)
    trial.delivery(content=NEW_ANSWER, key="reply-run-2", run_id="run-2")
    result = submit.check(trial.build())
    assert result.verdict is V.PASS, result
    assert "got a run and a reply of its own" in result.summary


def test_a_new_request_given_the_purged_runs_answer_fails() -> None:
    """dbos-transact-py #769: the purged run's step output replayed, the model never asked."""
    trial = builders.clean_trial()
    old = next(e.seq for e in trial.sink if isinstance(e, ledger.ReplyDelivery))
    reused_key(trial)
    trial.delivery(key="reply-run-2", run_id="run-2")  # the old content again
    result = submit.check(trial.build())
    assert result.verdict is V.FAIL
    assert result.summary.startswith("replayed an old result: the reply to the new request")
    assert f"the purged run's reply (seq {old})" in result.summary


def test_a_new_request_answered_by_the_purged_run_fails() -> None:
    trial = builders.clean_trial()
    reused_key(trial, answered=builders.RUN_ID)
    result = submit.check(trial.build())
    assert result.verdict is V.FAIL
    assert "was answered by the purged run run-1" in result.summary
