"""Exploration: Hypothesis generates fault schedules, each runs as a real trial, failures shrink.

A clean baseline trial records which (point, occurrence) hits the engine reaches for the
scenario; schedules are drawn from those (plus the next occurrence of each point, which
only recovery can reach, e.g. run.claimed#2). Each schedule runs as a real trial against
one Lab. The first FAIL fixes the failure's signature (its failing invariants); Hypothesis
then shrinks the schedule (fewer steps, earlier points, smaller occurrences) while it keeps
failing one of those invariants, with a bounded number of real trials. A failure of
run.liveness alone (the weakest evidence: a hang, or a slow machine) may shrink into a
safety failure; a safety failure never shrinks into a different one. The minimal schedule
is replayed from scratch: a failure that does not fail every replay is FLAKY, never a pass.

The search is seeded: the same seed and baseline trace give the same schedules. That is
what shards it (`--shard I/N`): every shard generates the same list, runs the schedules whose
label hashes to it and passes over the others as if they had passed, so that until a shard
finds a failure the shards together run exactly the unsharded search's schedules. A shard
that finds one shrinks and replays it alone (harness/shards/merge_explore.py).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import pathlib
import random
import shlex
import time
from collections.abc import Callable, Sequence

import hypothesis
import hypothesis.errors
import yaml
from hypothesis import strategies as st

from harness import errors
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import spec
from harness.lab import shared
from harness.planning import plan
from harness.planning import shard as shard_module
from harness.scenario import schema
from harness.trial import artifacts as store
from harness.trial import runner

DEFAULT_FAULTS = ("kill", "pause")
DEFAULT_MAX_FAULTS = 3
# Real trials Hypothesis may spend on shrinking once a failure is found.
DEFAULT_SHRINK_BUDGET = 12
# Fresh runs of the minimal schedule; each must fail again for the failure to count.
DEFAULT_REPLAYS = 2

Point = tuple[str, int]  # (point, occurrence)
# Invariants whose failure alone may give way to a safety failure while shrinking.
LIVENESS = frozenset({"run.liveness"})


class Status(enum.StrEnum):
    REPRODUCIBLE = "FAIL"
    FLAKY = "FLAKY"


@dataclasses.dataclass(frozen=True)
class Observation:
    """What exploration needs to know about one trial."""

    verdict: verdict_module.Verdict
    failing: tuple[str, ...]  # invariants whose verdict is FAIL
    directory: pathlib.Path | None = None

    @property
    def failed(self) -> bool:
        return self.verdict is verdict_module.Verdict.FAIL

    @classmethod
    def of(cls, outcome: runner.TrialOutcome) -> Observation:
        failing = tuple(
            result.invariant
            for result in outcome.results
            if result.verdict is verdict_module.Verdict.FAIL
        )
        return cls(verdict=outcome.verdict, failing=failing, directory=outcome.directory)


# Runs one schedule as a trial; `purpose` names it ("example", "shrink", "replay").
RunSchedule = Callable[[list[spec.FaultStep], str], Observation]


@dataclasses.dataclass
class Failure:
    schedule: list[spec.FaultStep]  # the minimal schedule found
    invariants: tuple[str, ...]  # its failing invariants
    found: list[spec.FaultStep]  # the schedule as first found, before shrinking
    replays: list[Observation]
    status: Status
    directory: pathlib.Path | None = None  # the trial that showed the minimal failure
    repro: str = ""
    schedule_file: pathlib.Path | None = None
    engine_ref: str = "reference"

    @property
    def labels(self) -> list[str]:
        return [step.label() for step in self.schedule]


@dataclasses.dataclass
class ExploreResult:
    seed: int
    candidates: int = 0  # distinct (point, occurrence) the schedules were drawn from
    examples: int = 0  # trials of generated schedules (until the first failure)
    shrinks: int = 0  # trials spent shrinking
    replays: int = 0  # trials replaying the minimal schedule
    verdicts: dict[str, int] = dataclasses.field(default_factory=dict)  # over all trials
    failure: Failure | None = None
    wall_s: float = 0.0
    passed_over: int = 0  # generated schedules another shard runs
    # With a shard: every schedule the unsharded search would generate, by label, in order.
    planned: list[str] = dataclasses.field(default_factory=list)

    @property
    def trials(self) -> int:
        return self.examples + self.shrinks + self.replays

    @property
    def exit_code(self) -> int:
        """1: a reproducible failure; 2: a flaky one only; 3: trials broke; 0: none failed."""
        if self.failure is not None:
            return 1 if self.failure.status is Status.REPRODUCIBLE else 2
        if self.verdicts.get(verdict_module.Verdict.ERROR.value):
            return verdict_module.Verdict.ERROR.exit_code
        return 0


# -- what schedules are made of -----------------------------------------------------------


# The run as a whole, where a per-run fault (submit_twice) strikes: one point, no occurrence.
RUN: Point = (spec.RUN_POINT, 1)


@dataclasses.dataclass(frozen=True)
class Space:
    """Where faults may strike: the baseline's hits in order, then its world points (where
    the world answered, applied, accepted: the faults of the world's response strike
    there), then the run as a whole; then the hits and world points only recovery reaches.
    The matrix plans the same places (harness/planning/plan.py, fault_plans)."""

    reached: tuple[Point, ...]
    beyond: tuple[Point, ...] = ()
    # Occurrences of world:model.answered the engine asked to stream (None: not known).
    streamed: frozenset[int] | None = None

    def all(self) -> list[Point]:
        return [*self.reached, *self.beyond]

    def admits(self, fault: str, hit: Point) -> bool:
        """A stream is cut only where the engine streamed; one that never streams gets
        one stream_cut, at the first answer, recorded as not applicable (as the matrix)."""
        if not spec.applies_at(fault, hit[0]):
            return False
        if fault != "stream_cut" or self.streamed is None:
            return True
        return hit[1] in (self.streamed or {1})


def _next_occurrences(reached: Sequence[Point]) -> list[Point]:
    last: dict[str, int] = {}
    for point, occurrence in reached:
        last[point] = max(last.get(point, 0), occurrence)
    return [(point, last[point] + 1) for point in last]


def candidates(
    trace: Sequence[Point],
    *,
    points: Sequence[str] | None = None,
    world: plan.WorldTrace | None = None,
) -> Space:
    """The baseline's hits in order, its world points, the run; then the next occurrence of
    each point and world point (recovery only).

    Earlier means simpler: Hypothesis shrinks towards the first hits of the baseline.
    `points` keeps only these boundaries (base names; their before_commit twins included),
    and world points and `run` only when named.
    """
    reached = list(dict.fromkeys(trace))
    beyond = _next_occurrences(reached)
    world_points = list(dict.fromkeys(world.points)) if world is not None else []
    reached += [*world_points, RUN]
    beyond += _next_occurrences(world_points)
    if points:
        wanted = set(points)
        reached = [hit for hit in reached if boundaries.base_name(hit[0]) in wanted]
        beyond = [hit for hit in beyond if boundaries.base_name(hit[0]) in wanted]
    streamed = None if world is None else world.streamed
    return Space(reached=tuple(reached), beyond=tuple(beyond), streamed=streamed)


def schedules(
    space: Space, faults: Sequence[str], *, max_faults: int
) -> st.SearchStrategy[list[spec.FaultStep]]:
    """1..max_faults steps at distinct hits, in the order of the space.

    The first step strikes a hit the baseline reached; only the others may strike beyond
    it (a second claim, say), which only an earlier fault's recovery can reach.
    """

    def usable(hits: Sequence[Point]) -> list[Point]:
        return [hit for hit in hits if any(space.admits(fault, hit) for fault in faults)]

    reached, everywhere = usable(space.reached), usable(space.all())
    if not reached:
        raise errors.CrashcertError(
            f"no baseline point admits any of the faults {list(faults)}: nothing to explore"
        )
    rank = {hit: index for index, hit in enumerate(everywhere)}

    def step(hits: list[Point]) -> st.SearchStrategy[spec.FaultStep]:
        @st.composite
        def draw_step(draw: st.DrawFn) -> spec.FaultStep:
            point, occurrence = draw(st.sampled_from(hits))
            actions = [fault for fault in faults if space.admits(fault, (point, occurrence))]
            action = draw(st.sampled_from(actions))  # a catalog name (check_faults)
            params: dict[str, object] = {}
            fault = spec.CATALOG[action]
            if fault.per_run or fault.each_choice:  # a value of its choice, as the matrix
                params = draw(st.sampled_from(spec.per_run_choices(action)))
            return spec.FaultStep(action=action, point=point, occurrence=occurrence, params=params)

        return draw_step()

    Steps = list[spec.FaultStep]

    def ordered(drawn: tuple[spec.FaultStep, Steps]) -> Steps:
        first, more = drawn
        distinct: dict[Point, spec.FaultStep] = {(first.point, first.occurrence): first}
        for other in more:
            distinct.setdefault((other.point, other.occurrence), other)
        steps = sorted(distinct.values(), key=lambda s: rank[(s.point, s.occurrence)])
        return spec.stopping_once(steps)  # a failover stops Postgres once

    more = st.lists(
        step(everywhere), max_size=max_faults - 1, unique_by=lambda s: (s.point, s.occurrence)
    )
    return st.tuples(step(reached), more).map(ordered)


def check_faults(faults: Sequence[str]) -> list[str]:
    return spec.parse_classes(",".join(faults))


# -- the search ---------------------------------------------------------------------------


class _Search:
    """The condition Hypothesis searches with: a cached, budgeted trial per schedule."""

    def __init__(
        self,
        run: RunSchedule,
        result: ExploreResult,
        *,
        shrink_budget: int,
        progress: Progress,
        owns: Owns | None = None,
    ) -> None:
        self._run = run
        self._owns = owns
        self._result = result
        self._shrink_budget = shrink_budget
        self._progress = progress
        self._seen: dict[tuple[str, ...], Observation] = {}
        self.signature: frozenset[str] | None = None
        self.found: list[spec.FaultStep] | None = None
        self.generated: list[list[str]] = []  # every schedule tried, in order

    def __call__(self, schedule: list[spec.FaultStep]) -> bool:
        key = tuple(step.label() for step in schedule)
        if self.signature is None and self._owns is not None and not self._owns(schedule):
            # another shard's: passed over as a pass, so the search goes on as unsharded
            self._result.passed_over += 1
            return False
        observation = self._seen.get(key)
        if observation is None:
            shrinking = self.signature is not None
            if shrinking and self._result.shrinks >= self._shrink_budget:
                return False  # out of budget: keep the smallest failure so far
            purpose = "shrink" if shrinking else "example"
            observation = self._run(schedule, purpose)
            self._seen[key] = observation
            self.generated.append(list(key))
            if shrinking:
                self._result.shrinks += 1
            else:
                self._result.examples += 1
            _count(self._result, observation)
            self._progress(purpose, schedule, observation)
        if not observation.failed:
            return False
        if self.signature is None:
            self.signature = frozenset(observation.failing)
            self.found = list(schedule)
        return self.same_bug(observation)

    def same_bug(self, observation: Observation) -> bool:
        """A failure of a signature invariant, or a safety failure after a liveness one."""
        assert self.signature is not None
        failing = set(observation.failing)
        if not observation.failed:
            return False
        if self.signature & failing:
            return True
        return self.signature <= LIVENESS and bool(failing - LIVENESS)

    def observation(self, schedule: list[spec.FaultStep]) -> Observation:
        return self._seen[tuple(step.label() for step in schedule)]


Progress = Callable[[str, list[spec.FaultStep], Observation], None]
# Whether this shard runs a generated schedule (None: every schedule is this run's).
Owns = Callable[[list[spec.FaultStep]], bool]


def _quiet(purpose: str, schedule: list[spec.FaultStep], observation: Observation) -> None:
    del purpose, schedule, observation


def _count(result: ExploreResult, observation: Observation) -> None:
    key = observation.verdict.value
    result.verdicts[key] = result.verdicts.get(key, 0) + 1


def search(
    run: RunSchedule,
    space: Space,
    *,
    faults: Sequence[str] = DEFAULT_FAULTS,
    examples: int,
    seed: int,
    max_faults: int = DEFAULT_MAX_FAULTS,
    shrink_budget: int = DEFAULT_SHRINK_BUDGET,
    replays: int = DEFAULT_REPLAYS,
    progress: Progress | None = None,
    owns: Owns | None = None,
) -> tuple[ExploreResult, _Search]:
    """Generate up to `examples` schedules over `space`; shrink and replay the first failure.

    Pure of I/O itself: `run` executes a schedule (a real trial, or a fake in unit tests).
    With `owns`, schedules it refuses are passed over until a failure is found.
    """
    if examples < 1:
        raise errors.CrashcertError("--examples must be at least 1")
    if max_faults < 1:
        raise errors.CrashcertError("--max-faults must be at least 1")
    started = time.monotonic()
    result = ExploreResult(seed=seed, candidates=len(space.all()))
    tell = progress or _quiet
    condition = _Search(run, result, shrink_budget=shrink_budget, progress=tell, owns=owns)
    strategy = schedules(space, check_faults(faults), max_faults=max_faults)
    config = hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,  # the seed below decides
        phases=(hypothesis.Phase.generate, hypothesis.Phase.shrink),
        suppress_health_check=list(hypothesis.HealthCheck),
        verbosity=hypothesis.Verbosity.quiet,
        report_multiple_bugs=False,
    )
    try:
        minimal = hypothesis.find(strategy, condition, settings=config, random=random.Random(seed))
    except hypothesis.errors.NoSuchExample:
        minimal = None
    if minimal is not None:
        assert condition.signature is not None and condition.found is not None
        result.failure = _confirm(run, condition, minimal, replays, result, tell)
    result.wall_s = time.monotonic() - started
    return result, condition


def _confirm(
    run: RunSchedule,
    condition: _Search,
    minimal: list[spec.FaultStep],
    replays: int,
    result: ExploreResult,
    tell: Progress,
) -> Failure:
    """Replay the minimal schedule (then, if it will not fail again, the one first found)."""
    assert condition.signature is not None and condition.found is not None
    tries = [minimal]
    if [s.label() for s in condition.found] != [s.label() for s in minimal]:
        tries.append(condition.found)
    failure: Failure | None = None
    for schedule in tries:
        shown = condition.observation(schedule)
        again: list[Observation] = []
        for _ in range(replays):
            observation = run(schedule, "replay")
            result.replays += 1
            _count(result, observation)
            tell("replay", schedule, observation)
            again.append(observation)
        reproduced = all(condition.same_bug(o) for o in again)
        candidate = Failure(
            schedule=list(schedule),
            invariants=shown.failing,
            found=list(condition.found),
            replays=again,
            status=Status.REPRODUCIBLE if reproduced else Status.FLAKY,
            directory=shown.directory,
        )
        failure = failure or candidate
        if reproduced:
            return candidate
    assert failure is not None
    return failure


def generated(
    space: Space,
    *,
    faults: Sequence[str],
    examples: int,
    seed: int,
    max_faults: int = DEFAULT_MAX_FAULTS,
) -> list[str]:
    """The labels of the schedules `search` generates while nothing fails, in order: the
    plan every shard of one exploration shares (no trial runs)."""

    def passes(schedule: list[spec.FaultStep], purpose: str) -> Observation:
        del schedule, purpose
        return Observation(verdict=verdict_module.Verdict.PASS, failing=())

    _, condition = search(
        passes, space, faults=faults, examples=examples, seed=seed, max_faults=max_faults
    )
    return ["+".join(labels) for labels in condition.generated]


# -- against a real Lab ---------------------------------------------------------------------


def explore(
    lab: shared.Lab,
    scenario: schema.Scenario,
    *,
    out_dir: pathlib.Path,
    examples: int,
    seed: int,
    faults: Sequence[str] = DEFAULT_FAULTS,
    max_faults: int = DEFAULT_MAX_FAULTS,
    points: Sequence[str] | None = None,
    shrink_budget: int = DEFAULT_SHRINK_BUDGET,
    replays: int = DEFAULT_REPLAYS,
    scenario_ref: str | None = None,
    engine_ref: str = "reference",
    progress: Progress | None = None,
    shard: shard_module.Shard | None = None,
) -> ExploreResult:
    """Baseline, then `search` with real trials; a failure gets its repro and schedule file.
    With a `shard`, only the generated schedules it owns run (shrinking is the shard's own)."""
    faults = check_faults(faults)
    counter = itertools.count(1)
    base = runner.TrialSpec(
        scenario=scenario, seed=seed, scenario_ref=scenario_ref, engine_ref=engine_ref
    )

    def run(schedule: list[spec.FaultStep], purpose: str) -> Observation:
        label = f"{purpose}-{next(counter):03d}-{plan.plan_label(schedule)}"
        spec = base.model_copy(update={"plan": list(schedule), "label": label})
        return Observation.of(runner.run_trial(lab, spec, out_dir=out_dir))

    baseline = runner.run_trial(lab, base, out_dir=out_dir)
    if baseline.verdict is not verdict_module.Verdict.PASS:
        raise errors.CrashcertError(
            f"the baseline of {scenario.name} without faults is {baseline.verdict.value}, "
            f"nothing to explore from; see {baseline.directory} (rerun: {baseline.repro})"
        )
    space = candidates(
        plan.baseline_trace(baseline.history),
        points=points,
        world=plan.world_trace(baseline.history),
    )

    def owns(schedule: list[spec.FaultStep]) -> bool:
        return shard is None or shard.owns(scenario.name, plan.plan_label(schedule))

    result, _ = search(
        run,
        space,
        faults=faults,
        examples=examples,
        seed=seed,
        max_faults=max_faults,
        shrink_budget=shrink_budget,
        replays=replays,
        progress=progress,
        owns=None if shard is None else owns,
    )
    if shard is not None:
        result.planned = generated(
            space, faults=faults, examples=examples, seed=seed, max_faults=max_faults
        )
    if result.failure is not None:
        spec = base.model_copy(update={"plan": result.failure.schedule})
        result.failure.repro = runner.repro_command(spec)
        result.failure.engine_ref = engine_ref
        result.failure.schedule_file = write_schedule(
            out_dir, scenario, result.failure.schedule, status=result.failure.status
        )
    return result


def write_schedule(
    out_dir: pathlib.Path,
    scenario: schema.Scenario,
    schedule: list[spec.FaultStep],
    *,
    status: Status,
) -> pathlib.Path:
    """The scenario with `faults:` set to the schedule: `crashcert run --scenario FILE`."""
    labels = [step.label() for step in schedule]
    note = f"minimal schedule found by crashcert explore ({status.value}): {', '.join(labels)}"
    copy = scenario.model_copy(update={"faults": labels, "note": note})
    path = out_dir / f"{store.safe_name(scenario.name)}.minimal.yaml"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(copy.model_dump(mode="json"), sort_keys=False))
    schema.load(path)  # what we print must be runnable
    return path


def render(result: ExploreResult) -> list[str]:
    """The summary lines, like Hypothesis's falsifying example: seed, counts, reproduction."""
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(result.verdicts.items()))
    lines = [
        f"seed {result.seed}: {result.examples} schedules over {result.candidates} points, "
        f"{result.shrinks} shrink and {result.replays} replay trials ({counts or 'none'}) "
        f"in {result.wall_s:.1f}s"
    ]
    if result.passed_over:
        lines.append(f"{result.passed_over} generated schedules left to the other shards")
    failure = result.failure
    if failure is None:
        lines.append("no failure found")
        return lines
    failed = sum(1 for o in failure.replays if o.failed)
    head = "Falsifying schedule" if failure.status is Status.REPRODUCIBLE else "FLAKY schedule"
    lines.append(
        f"{head} ({len(failure.schedule)} fault(s), failing {', '.join(failure.invariants)}; "
        f"failed {failed} of {len(failure.replays)} replays; first found as "
        f"{plan.plan_label(failure.found)}):"
    )
    lines.append(f"  {failure.repro}")
    if failure.schedule_file is not None:
        command = ["crashcert", "run", "--engine", failure.engine_ref]
        command += ["--scenario", str(failure.schedule_file)]
        lines.append(f"  {shlex.join(command)}")
    if failure.directory is not None:
        lines.append(f"  trial: {failure.directory}")
    if failure.status is Status.FLAKY:
        lines.append("  the failure did not reproduce on every replay: FLAKY, not a pass")
    return lines


def summary(result: ExploreResult) -> dict[str, object]:
    """The result as JSON: counts, and the failure's schedule, invariants and reproduction."""
    failure = result.failure
    return {
        "seed": result.seed,
        "candidates": result.candidates,
        "examples": result.examples,
        "shrinks": result.shrinks,
        "replays": result.replays,
        "verdicts": result.verdicts,
        "wall_s": round(result.wall_s, 3),
        "exit_code": result.exit_code,
        "passed_over": result.passed_over,
        "failure": None
        if failure is None
        else {
            "status": failure.status.value,
            "schedule": failure.labels,
            "found": [step.label() for step in failure.found],
            "invariants": list(failure.invariants),
            "replays_failed": sum(1 for o in failure.replays if o.failed),
            "replays": len(failure.replays),
            "repro": failure.repro,
            "schedule_file": str(failure.schedule_file) if failure.schedule_file else None,
            "trial": str(failure.directory) if failure.directory else None,
        },
    }
