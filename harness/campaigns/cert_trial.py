"""A trial as a certificate counts it: a live one (CertTrial) or one a shard recorded
(harness/shards/merge_certify.py), both read through `Counted`'s rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import spec as fault_spec
from harness.report import summary
from harness.trial import runner

Mode = Literal["boundary", "blackbox"]
TIME = "time"
PLAN_APPLIED = "plan.applied"
ACTIONS = "scenario.actions"  # harness/trial/actions.py: every scenario action applied
FRONTIER = "frontier.monotonic"
Verdict = verdict_module.Verdict


class Counted:
    """How a certificate counts a trial's results (a live trial's or a shard's record)."""

    def checks(self) -> Sequence[verdict_module.CheckResult]:
        raise NotImplementedError

    def result(self, invariant: str) -> verdict_module.CheckResult | None:
        return next((r for r in self.checks() if r.invariant == invariant), None)

    @property
    def struck(self) -> bool:
        """Every planned fault struck (plan.applied PASSed; a baseline has none to strike)
        and every scenario action applied: a purge or a cancel that never happened left the
        run untested as much as a fault that never struck."""
        done = [self.result(PLAN_APPLIED), self.result(ACTIONS)]
        return all(r is None or r.verdict is Verdict.PASS for r in done)

    def verdict(self, invariant: str) -> Verdict:
        """The invariant's verdict as the certificate counts it. A PASS in a trial whose
        fault never struck shows nothing (INCONCLUSIVE): the run was never put to the test.
        A FAIL stays a FAIL; a missing result is an ERROR."""
        result = self.result(invariant)
        if result is None:
            return Verdict.ERROR
        if result.verdict is Verdict.PASS and not self.struck:
            return Verdict.INCONCLUSIVE
        return result.verdict

    def self_reported(self, invariant: str) -> bool:
        """A frontier PASS resting only on the engine's own detail.frontier_version: a
        computed number would pass it, so it does not count toward a level."""
        result = self.result(invariant)
        return (
            invariant == FRONTIER
            and result is not None
            and result.verdict is Verdict.PASS
            and result.durable is not True  # frontier.check judged no checkpoints table
        )


@dataclasses.dataclass(frozen=True)
class CertTrial(Counted):
    mode: Mode
    outcome: runner.TrialOutcome

    @property
    def fault_class(self) -> str:
        """`baseline`, or ACTION@boundary / ACTION@world / ACTION@time / ACTION@run (a
        per-run fault, submit_twice) of its first fault."""
        plan = self.outcome.spec.plan
        if not plan:
            return "baseline"
        point = plan[0].point
        if boundaries.is_world_point(point):
            where = "world"
        elif boundaries.time_point_seconds(point) is not None:
            where = TIME
        elif point == fault_spec.RUN_POINT:
            where = fault_spec.RUN_POINT
        else:
            where = "boundary"
        return f"{plan[0].action}@{where}"

    def checks(self) -> Sequence[verdict_module.CheckResult]:
        return self.outcome.results

    @property
    def scenario(self) -> str:
        return self.outcome.spec.scenario.name

    @property
    def label(self) -> str:
        return self.outcome.spec.label

    @property
    def trial_verdict(self) -> Verdict:
        return self.outcome.verdict

    @property
    def repro(self) -> str:
        return self.outcome.repro

    @property
    def directory(self) -> str:
        return str(self.outcome.directory)

    def json(self) -> dict[str, Any]:
        return summary.outcome_json(self.outcome)


class Trial(Protocol):
    """What a certificate needs of a trial: a CertTrial, or one a shard recorded
    (harness/shards/merge_certify.py)."""

    @property
    def mode(self) -> Mode: ...
    @property
    def fault_class(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def trial_verdict(self) -> Verdict: ...
    @property
    def repro(self) -> str: ...
    @property
    def directory(self) -> str: ...
    @property
    def struck(self) -> bool: ...
    def checks(self) -> Sequence[verdict_module.CheckResult]: ...
    def result(self, invariant: str) -> verdict_module.CheckResult | None: ...
    def verdict(self, invariant: str) -> Verdict: ...
    def self_reported(self, invariant: str) -> bool: ...
    def json(self) -> dict[str, Any]: ...
