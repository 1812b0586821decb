"""Verdicts, combine, the registry and the trial verdict."""

from __future__ import annotations

import pytest

from harness import checkers, errors
from harness.checkers import verdict
from tests.checkers import builders

V = verdict.Verdict


def result(value: verdict.Verdict) -> verdict.CheckResult:
    return verdict.CheckResult(invariant="x", verdict=value, summary="s")


def test_exit_codes() -> None:
    assert [v.exit_code for v in (V.PASS, V.FAIL, V.INCONCLUSIVE, V.ERROR)] == [0, 1, 2, 3]
    assert V("FAIL") is V.FAIL and V.FAIL == "FAIL"


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([V.PASS, V.PASS], V.PASS),
        ([V.PASS, V.INCONCLUSIVE], V.INCONCLUSIVE),
        ([V.INCONCLUSIVE, V.ERROR, V.PASS], V.ERROR),
        ([V.ERROR, V.FAIL, V.INCONCLUSIVE], V.FAIL),
        ([], V.ERROR),
    ],
)
def test_combine(verdicts: list[verdict.Verdict], expected: verdict.Verdict) -> None:
    assert verdict.combine(result(v) for v in verdicts) is expected


def test_summary_is_one_line() -> None:
    assert verdict.CheckResult(invariant="x", verdict=V.PASS, summary="a\nb").summary == "a b"


def test_invariants_are_the_design_ids_in_order() -> None:
    assert checkers.INVARIANTS == (
        "model.once_after_decision",
        "model.count",
        "tool.at_most_once",
        "tool.at_least_once",
        "tool.same_key",
        "tool.approval",
        "tool.unknown_outcome",
        "budget.not_restored",
        "reply.single_delivery",
        "run.single_submit",
        "run.liveness",
        "lease.fencing",
        "transcript.intact",
        "frontier.monotonic",
    )


def test_clean_trial_passes_every_checker() -> None:
    history = builders.clean()
    results = checkers.check_all(history)
    assert [r.invariant for r in results] == list(checkers.INVARIANTS)
    assert {r.invariant: r.verdict for r in results} == {i: V.PASS for i in checkers.INVARIANTS}
    assert checkers.trial_verdict(history, results) is V.PASS


def test_only_runs_the_named_checkers_in_order() -> None:
    results = checkers.check_all(builders.clean(), only=["reply.single_delivery", "model.count"])
    assert [r.invariant for r in results] == ["model.count", "reply.single_delivery"]


def test_only_rejects_unknown_ids() -> None:
    with pytest.raises(errors.CrashcertError, match=r"model\.cuont"):
        checkers.check_all(builders.clean(), only=["model.cuont"])


def test_a_crashing_checker_is_an_error_never_a_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(history: object) -> verdict.CheckResult:
        raise KeyError("call_refund")

    monkeypatch.setitem(checkers.REGISTRY, "tool.at_most_once", broken)
    history = builders.clean()
    results = checkers.check_all(history)
    crashed = next(r for r in results if r.invariant == "tool.at_most_once")
    assert crashed.verdict is V.ERROR
    assert "KeyError" in crashed.summary and "call_refund" in builders.evidence(crashed)
    assert checkers.trial_verdict(history, results) is V.ERROR


def test_a_checker_answering_for_another_invariant_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(checkers.REGISTRY, "model.count", lambda history: result(V.PASS))
    (checked,) = checkers.check_all(builders.clean(), only=["model.count"])
    assert checked.verdict is V.ERROR


def test_harness_error_makes_the_trial_an_error_though_checkers_run() -> None:
    trial = builders.clean_trial()
    trial.harness_error = "toxiproxy died"
    history = trial.build()
    results = checkers.check_all(history)
    assert len(results) == len(checkers.INVARIANTS)
    assert sum(r.verdict is V.PASS for r in results) == len(results) - 1  # liveness: ERROR
    assert checkers.trial_verdict(history, results) is V.ERROR


def test_missing_evidence_is_inconclusive_not_pass() -> None:
    # A black-box engine: no detail and no decision points; no reports either.
    trial = builders.clean_trial()
    trial.reports = []
    history = builders.without_detail(trial.build())
    events = [
        e for e in history.events if getattr(e, "point", "") not in ("tools.pending", "reply.ready")
    ]
    history = history.model_copy(update={"events": events})
    results = {r.invariant: r.verdict for r in checkers.check_all(history)}
    assert results["model.once_after_decision"] is V.INCONCLUSIVE
    assert results["frontier.monotonic"] is V.INCONCLUSIVE
    assert results["budget.not_restored"] is V.INCONCLUSIVE
    assert results["reply.single_delivery"] is V.INCONCLUSIVE
    assert checkers.trial_verdict(history, checkers.check_all(history)) is not V.PASS
