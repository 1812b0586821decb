"""The crash matrix: scenarios x (point, occurrence) of a clean baseline, one kill each."""

from __future__ import annotations

import dataclasses
import pathlib
import threading
import time
from collections.abc import Callable

from harness.checkers import verdict as verdict_module
from harness.engines import capabilities
from harness.faults import spec as fault_spec
from harness.lab import shared
from harness.planning import plan
from harness.planning import shard as shard_module
from harness.report import timeline
from harness.scenario import schema
from harness.trial import interrupt, runner

# Called after each trial (for progress bars): (outcome, done, total or None).
Progress = Callable[[runner.TrialOutcome, int, int | None], None]
# Keeps a planned fault trial or not (certify plans only what its level asks for).
Select = Callable[[list[fault_spec.FaultStep]], bool]


@dataclasses.dataclass
class MatrixResult:
    outcomes: list[runner.TrialOutcome] = dataclasses.field(default_factory=list)
    # Declared points no scenario's baseline reached: the matrix cannot vouch for them.
    unreached: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    # Every trial of the whole plan, (scenario, label) in order, whichever shard runs it.
    planned: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    jobs: str = ""  # how many fault trials ran at once, as the summary says it
    # Scenario -> the capabilities it needs and the engine does not offer: not run, and
    # the matrix cannot vouch for it (INCONCLUSIVE, never FAIL).
    not_run: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def verdict(self) -> verdict_module.Verdict:
        verdicts = [outcome.verdict for outcome in self.outcomes]
        if self.unreached or self.not_run:
            verdicts.append(verdict_module.Verdict.INCONCLUSIVE)
        return verdict_module.worst(verdicts)


def run_matrix(
    lab: shared.Lab,
    scenarios: list[tuple[str, schema.Scenario]],
    *,
    out_dir: pathlib.Path,
    engine_ref: str,
    faults: list[str] | None = None,
    second_kill: bool = False,
    seed: int = 0,
    jobs: interrupt.Jobs = 1,
    points: list[str] | None = None,
    progress: Progress | None = None,
    shard: shard_module.Shard | None = None,
    select: Select | None = None,
) -> MatrixResult:
    """`scenarios` pairs how the user named each scenario with the scenario itself.

    Baselines run first, then the fault trials planned from them, each phase `jobs` at a
    time, or as many as the measured load allows (autojobs.Auto); each trial has its own
    database, world, socket and proxies. A trial that restarts Postgres runs alone, since
    the restart strikes every trial's connections. With a `shard`, only the fault trials it
    owns run after every baseline (the plan is derived from them all).
    """
    started = time.monotonic()
    result = MatrixResult()
    counter = _Counter(progress)
    specs: list[runner.TrialSpec] = []
    traces: list[list[tuple[str, int]]] = []
    offers = capabilities.offered(lab.engine)
    # A class that needs what the engine does not offer (upgrade without a next version)
    # is not planned: each scenario's trials of it are listed as not run.
    unoffered = capabilities.missing_for_faults(faults or [], offers)
    faults = [fault for fault in faults or ["kill"] if fault not in unoffered]
    bases: list[runner.TrialSpec] = []
    for reference, scenario in scenarios:
        if lacking := capabilities.missing(scenario, offers):
            result.not_run[scenario.name] = lacking
            continue
        for fault in unoffered:
            named = capabilities.under_fault(scenario.name, fault)
            result.not_run[named] = [fault_spec.NEEDS[fault]]
        bases.append(
            runner.TrialSpec(
                scenario=scenario, seed=seed, scenario_ref=reference, engine_ref=engine_ref
            )
        )

    def run_baseline(base: runner.TrialSpec) -> runner.TrialOutcome:
        outcome = runner.run_trial(lab, base, out_dir=out_dir)
        counter.done(outcome)
        return outcome

    # each baseline has its own database and world like any trial, so they share the pool
    baselines = interrupt.run_pool(run_baseline, bases, jobs=jobs)
    for base, baseline in zip(bases, baselines, strict=True):
        result.outcomes.append(baseline)
        result.planned.append((base.scenario.name, baseline.spec.label))
        trace = plan.baseline_trace(baseline.history)
        traces.append(trace)
        world = plan.world_trace(baseline.history)
        for steps in plan.at_points(
            plan.fault_plans(trace, faults, second_kill=second_kill, world=world),
            points,
        ):
            if select is not None and not select(steps):
                continue
            specs.append(base.model_copy(update={"plan": steps, "label": plan.plan_label(steps)}))

    result.planned.extend((spec.scenario.name, spec.label) for spec in specs)
    if shard is not None:
        specs = [spec for spec in specs if shard.owns(spec.scenario.name, spec.label)]

    def run(spec: runner.TrialSpec) -> runner.TrialOutcome:
        outcome = runner.run_trial(lab, spec, out_dir=out_dir)  # pg_restart runs alone
        counter.done(outcome)
        return kept(outcome)

    result.outcomes.extend(interrupt.run_pool(run, specs, jobs=jobs))  # in the plan's order
    result.unreached = plan.unreached(lab.engine.boundaries, traces)
    result.jobs = interrupt.describe(jobs)
    result.wall_s = time.monotonic() - started
    return result


def kept(outcome: runner.TrialOutcome) -> runner.TrialOutcome:
    """What a campaign holds of a finished trial: a passed one has its own page written now
    and only a light history in memory, so a matrix's memory stays flat however many trials
    it runs; a failing one stays whole for the report's sections."""
    if outcome.verdict is not verdict_module.Verdict.PASS or not outcome.directory.exists():
        return outcome
    timeline.write_trial_page(timeline.view_of_outcome(outcome))
    return outcome.model_copy(update={"history": outcome.history.lightened()})


class _Counter:
    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._done = 0
        self._lock = threading.Lock()

    def done(self, outcome: runner.TrialOutcome) -> None:
        with self._lock:
            self._done += 1
            if self._progress:
                self._progress(outcome, self._done, None)
