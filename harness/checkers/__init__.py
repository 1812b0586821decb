"""Checkers: pure functions from a TrialHistory to a verdict with evidence.

`check_all` runs every registered checker in the order of harness/CONTRACT.md section 7.
A checker that raises yields ERROR with the exception as evidence, never PASS; a trial
whose harness broke (`history.harness_error`) is an ERROR whatever the checkers said.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable

from harness import errors
from harness.checkers import (
    approval,
    budget,
    effects,
    fencing,
    frontier,
    liveness,
    model,
    reply,
    submit,
    tools,
    transcript,
    unknown_outcome,
    verdict,
)
from harness.record import history as history_module

Checker = Callable[[history_module.TrialHistory], verdict.CheckResult]

REGISTRY: dict[str, Checker] = {
    model.ONCE_AFTER_DECISION: model.check_once_after_decision,
    model.COUNT: model.check_count,
    tools.AT_MOST_ONCE: tools.check_at_most_once,
    effects.INVARIANT: effects.check,
    tools.SAME_KEY: tools.check_same_key,
    approval.INVARIANT: approval.check,
    unknown_outcome.INVARIANT: unknown_outcome.check,
    budget.INVARIANT: budget.check,
    reply.INVARIANT: reply.check,
    submit.INVARIANT: submit.check,
    liveness.INVARIANT: liveness.check,
    fencing.INVARIANT: fencing.check,
    transcript.INVARIANT: transcript.check,
    frontier.INVARIANT: frontier.check,
}
INVARIANTS: tuple[str, ...] = tuple(REGISTRY)


def _run(invariant: str, history: history_module.TrialHistory) -> verdict.CheckResult:
    # Looked up at call time so a test can replace one checker.
    checker = REGISTRY[invariant]
    try:
        result = checker(history)
    except Exception as error:  # a crashing checker is an ERROR, never a PASS
        last = traceback.extract_tb(error.__traceback__)[-1]
        return verdict.CheckResult(
            invariant=invariant,
            verdict=verdict.Verdict.ERROR,
            summary=f"checker crashed: {type(error).__name__}: {error}",
            evidence=[
                f"{type(error).__name__}: {error}",
                f"at {last.filename}:{last.lineno} in {last.name}",
            ],
        )
    if result.invariant != invariant:
        return verdict.CheckResult(
            invariant=invariant,
            verdict=verdict.Verdict.ERROR,
            summary=f"checker answered for {result.invariant!r} instead",
            evidence=[result.summary, *result.evidence],
        )
    return result


def check_all(
    history: history_module.TrialHistory, *, only: Iterable[str] | None = None
) -> list[verdict.CheckResult]:
    """Every registered checker (or those in `only`), in the order of INVARIANTS."""
    wanted = set(INVARIANTS if only is None else only)
    unknown = sorted(wanted - set(INVARIANTS))
    if unknown:
        raise errors.CrashcertError(
            f"unknown invariant(s) {unknown}; known: {', '.join(INVARIANTS)}"
        )
    return [_run(invariant, history) for invariant in INVARIANTS if invariant in wanted]


def trial_verdict(
    history: history_module.TrialHistory, results: Iterable[verdict.CheckResult]
) -> verdict.Verdict:
    """The trial's verdict: INCONCLUSIVE when the user stopped it (what broke after that is
    the stop's doing), ERROR when the harness broke, else the combined results."""
    if history.interrupted:
        return verdict.Verdict.INCONCLUSIVE
    if history.harness_error:
        return verdict.Verdict.ERROR
    return verdict.combine(results)
