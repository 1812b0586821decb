"""Verdicts and check results: what a checker returns, and how results combine.

After Jepsen: a checker says valid (PASS), invalid (FAIL, with evidence) or unknown
(INCONCLUSIVE); ERROR means the harness or the environment broke, never the engine.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import pydantic


class Verdict(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self]


_EXIT_CODES = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.INCONCLUSIVE: 2, Verdict.ERROR: 3}
# Worst first, the one order of verdicts: a FAIL is news about the engine, an ERROR says the
# harness broke, an INCONCLUSIVE proves nothing either way. Grids, counts and sorts follow it.
SEVERITY: tuple[Verdict, ...] = (Verdict.FAIL, Verdict.ERROR, Verdict.INCONCLUSIVE, Verdict.PASS)


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The first of SEVERITY among `verdicts`; none at all is an ERROR (nothing was judged)."""
    seen = set(verdicts)
    return next((verdict for verdict in SEVERITY if verdict in seen), Verdict.ERROR)


class CheckResult(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    invariant: str  # a stable id of harness/CONTRACT.md section 7's table
    verdict: Verdict
    summary: str  # one line
    # Precise facts: which call, which key, counts expected vs seen, ledger seq numbers.
    evidence: list[str] = pydantic.Field(default_factory=list)

    @pydantic.field_validator("summary")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return " ".join(value.split())


def combine(results: Iterable[CheckResult]) -> Verdict:
    """Any FAIL wins, then ERROR, then INCONCLUSIVE; nothing checked is an ERROR."""
    return worst(result.verdict for result in results)


def decide(
    invariant: str,
    *,
    failures: list[str],
    notes: list[str],
    unknowns: list[str] | None = None,
    passed: str,
) -> CheckResult:
    """The usual shape of a checker's answer: failures first, then unknowns, else PASS.

    The summary names the first failure (or unknown); the evidence lists every failure,
    every unknown, then the notes that explain what was checked.
    """
    unknowns = unknowns or []
    if failures:
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        return CheckResult(
            invariant=invariant,
            verdict=Verdict.FAIL,
            summary=failures[0] + more,
            evidence=[*failures, *unknowns, *notes],
        )
    if unknowns:
        return CheckResult(
            invariant=invariant,
            verdict=Verdict.INCONCLUSIVE,
            summary=unknowns[0],
            evidence=[*unknowns, *notes],
        )
    return CheckResult(invariant=invariant, verdict=Verdict.PASS, summary=passed, evidence=notes)
