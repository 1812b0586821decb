"""A worker that crashed on its own: the verdict points at its log, and no invariant PASSes
on nothing when the run never got that far (harness/checkers/reach.py)."""

from __future__ import annotations

from harness import checkers
from harness.checkers import verdict
from harness.record import history
from tests.checkers import builders

V = verdict.Verdict
TAIL = [
    "Traceback (most recent call last):",
    '  File "worker.py", line 42, in run',
    "ZeroDivisionError: division by zero",
]
CRASH = "worker w-1 (pid 100) crashed on its own with exit status 1"
# Invariants whose PASS would rest on nothing once the run died before the tools.
NOTHING_TO_JUDGE = (
    "tool.at_most_once",
    "tool.same_key",
    "tool.unknown_outcome",
    "reply.single_delivery",
    "lease.fencing",
)


def crash(trial: builders.Trial, worker: str = "w-1") -> None:
    """The harness found `worker` dead on its own and recorded its log's tail."""
    seq, t = trial.tick()
    trial.events.append(
        history.WorkerEvent(
            seq=seq,
            t=t,
            event="crashed",
            worker_id=worker,
            pid=100,
            returncode=1,
            log=f"workers/{worker}.log",
            log_tail=TAIL,
        )
    )


def judged(trial: builders.Trial) -> dict[str, verdict.CheckResult]:
    return {result.invariant: result for result in checkers.check_all(trial.build())}


def crashed_before_the_tools() -> builders.Trial:
    """Turn 0 decided, then the only worker dies with a Python exception: the run hangs."""
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    crash(trial)
    trial.report("running")
    return trial


def test_liveness_fails_pointing_at_the_crashed_workers_log() -> None:
    liveness = judged(crashed_before_the_tools())["run.liveness"]
    assert liveness.verdict is V.FAIL
    assert liveness.summary.startswith("hung: not terminal at the end (last status running")
    assert f"; {CRASH} (t=" in liveness.summary
    assert liveness.summary.endswith(
        "see workers/w-1.log, last line 'ZeroDivisionError: division by zero'"
    )
    assert "  workers/w-1.log: ZeroDivisionError: division by zero" in liveness.evidence
    assert "  workers/w-1.log: Traceback (most recent call last):" in liveness.evidence


def test_nothing_to_judge_in_a_run_cut_short_is_not_a_pass() -> None:
    results = judged(crashed_before_the_tools())
    for invariant in NOTHING_TO_JUDGE:
        result = results[invariant]
        assert result.verdict is V.INCONCLUSIVE, result
        assert result.summary.startswith("nothing to judge: "), result.summary
        assert "because the run never finished (last status running); " + CRASH in (result.summary)
    assert results["tool.at_most_once"].summary.startswith(
        "nothing to judge: no effect of a non-replayable tool reached the world, because"
    )
    # What the run did get to is judged on real evidence.
    for invariant in ("model.once_after_decision", "model.count", "budget.not_restored"):
        assert results[invariant].verdict is V.PASS, results[invariant]


def test_a_crash_before_any_model_answer_proves_no_decision_and_no_budget() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    crash(trial)
    trial.report("running")
    results = judged(trial)
    for invariant in ("model.once_after_decision", "budget.not_restored"):
        assert results[invariant].verdict is V.INCONCLUSIVE, results[invariant]
        assert CRASH in results[invariant].summary
    assert CRASH in results["model.count"].summary
    assert CRASH in results["transcript.intact"].summary


def test_a_crash_the_standby_recovered_from_is_named_and_the_run_judged() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    crash(trial)
    trial.claim("w-2")
    trial.run_tool("call_lookup")
    trial.close_round()
    builders.refund_round(trial)
    builders.last_turn(trial)
    results = judged(trial)
    assert {r.verdict for r in results.values()} == {V.PASS}, results
    assert any(line.startswith(CRASH) for line in results["run.liveness"].evidence)
    assert f"within the 20s deadline; recovered from a crash: {CRASH}" in (
        results["run.liveness"].summary
    )
    # The crashed holder was gone when its lease passed on: nothing to fence.
    assert results["lease.fencing"].summary.startswith("w-1 was gone when w-2 claimed at")


def test_nothing_to_do_in_a_run_that_ended_as_expected_still_passes() -> None:
    # The budget runs out after the lookup, as the scenario expects: no refund was due.
    trial = builders.Trial(builders.refund_scenario(expect="budget_exhausted"))
    builders.first_round(trial)
    trial.finish("budget_exhausted")
    results = judged(trial)
    assert results["run.liveness"].verdict is V.PASS
    assert results["tool.at_most_once"].verdict is V.PASS
    assert results["reply.single_delivery"].verdict is V.PASS


def test_a_hung_run_proves_nothing_it_never_reached() -> None:
    # No crash recorded (the worker may be stuck): the same emptiness, the same rule.
    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    trial.report("running")
    results = judged(trial)
    assert results["run.liveness"].verdict is V.FAIL
    for invariant in NOTHING_TO_JUDGE:
        assert results[invariant].verdict is V.INCONCLUSIVE, results[invariant]
        assert results[invariant].summary.endswith(
            "because the run never finished (last status running)"
        )


def test_a_worker_crashing_in_every_replacement_is_shown_a_few_times() -> None:
    trial = builders.Trial()
    trial.claim("w-1")
    for _ in range(10):
        crash(trial)
    trial.report("running")
    liveness = judged(trial)["run.liveness"]
    assert liveness.summary.endswith("'ZeroDivisionError: division by zero' (and 9 more crashes)")
    assert sum(line.startswith(CRASH) for line in liveness.evidence) == 3
    assert "7 more worker crashes (see workers/*.log)" in liveness.evidence
