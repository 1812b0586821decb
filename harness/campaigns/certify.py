"""Certification: the crash matrix in boundary and/or black-box mode, judged as a level.

`certify` runs the matrix through the same public path as `crashcert matrix` (an engine
description file, its baselines, one fault per trial) and adds, in black-box mode, kills
triggered by the world and seeded time kills. The result says per invariant and per fault
class what held, which level (harness/checkers/levels.py) the engine earns, and how to rerun each
failing trial. Rendered as a terminal table, JSON and Markdown (with a badge line).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import rich.console
import rich.table

from harness import checkers, errors
from harness.campaigns import certify_table, interrupt
from harness.campaigns import matrix as matrix_module
from harness.campaigns import shard as shard_module
from harness.checkers import levels
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import plan as plan_module
from harness.faults import spec as fault_spec
from harness.lab import shared
from harness.report import narrow, summary, terminal
from harness.scenario import schema
from harness.trial import runner

Mode = Literal["boundary", "blackbox"]
MODES: tuple[str, ...] = ("auto", "boundary", "blackbox", "both")
DEFAULT_TIME_KILLS = 2
# Matches no point: a mode whose points were all filtered out runs its baselines only.
_NO_POINT = "-"
TIME = "time"
# A shard's plan names a scenario's time kills as one item: their moments come from the
# wall-clock span of the baseline, which differs on every machine; one shard runs them all.
TIME_KILLS = "time kills"
PLAN_APPLIED = "plan.applied"
Verdict = verdict_module.Verdict


class Counted:
    """How a certificate counts a trial's results (a live trial's or a shard's record)."""

    def checks(self) -> Sequence[verdict_module.CheckResult]:
        raise NotImplementedError

    def result(self, invariant: str) -> verdict_module.CheckResult | None:
        return next((r for r in self.checks() if r.invariant == invariant), None)

    @property
    def struck(self) -> bool:
        """Every planned fault struck (plan.applied PASSed); a baseline has none to strike."""
        applied = self.result(PLAN_APPLIED)
        return applied is None or applied.verdict is Verdict.PASS

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
    (harness/campaigns/merge_certify.py)."""

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
    def json(self) -> dict[str, Any]: ...


@dataclasses.dataclass
class Certification:
    engine: str
    engine_ref: str
    modes: list[Mode]
    trials: list[Trial] = dataclasses.field(default_factory=list)
    unreached: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    # Every trial of the whole plan, (mode, scenario, label) in order, whichever shard runs it.
    planned: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    jobs: str = ""  # how many trials ran at once, as the summary says it
    # For the dated table (certify_table.py): the framework the description names, its
    # installed version, and the day the certification ran (UTC).
    framework: str = ""
    framework_version: str = ""
    date: str = dataclasses.field(default_factory=certify_table.today)

    @property
    def invariants(self) -> tuple[str, ...]:
        return checkers.INVARIANTS

    def verdict_of(self, invariant: str, trials: list[Trial] | None = None) -> Verdict:
        """The worst verdict of `invariant` over the trials (a missing result is an ERROR)."""
        chosen = self.trials if trials is None else trials
        return verdict_module.worst(trial.verdict(invariant) for trial in chosen)

    @property
    def held(self) -> set[str]:
        """Invariants that PASSed in every trial."""
        return {i for i in self.invariants if self.trials and self.verdict_of(i) is Verdict.PASS}

    @property
    def level(self) -> levels.Level:
        return levels.grant(self.held)

    @property
    def fault_classes(self) -> list[str]:
        seen: list[str] = []
        for trial in self.trials:
            name = f"{trial.mode}:{trial.fault_class}"
            if name not in seen:
                seen.append(name)
        return seen

    def in_class(self, name: str) -> list[Trial]:
        return [t for t in self.trials if f"{t.mode}:{t.fault_class}" == name]

    def failing(self) -> list[Trial]:
        """Trials where some invariant FAILed or ERRORed (INCONCLUSIVE shows in the table)."""
        bad = (Verdict.FAIL, Verdict.ERROR)
        return [
            t
            for t in self.trials
            if any(r.verdict in bad and r.invariant in self.invariants for r in t.checks())
        ]

    @property
    def errors(self) -> list[Trial]:
        return [t for t in self.trials if t.trial_verdict is Verdict.ERROR]

    @property
    def not_applied(self) -> list[Trial]:
        return [t for t in self.trials if not t.struck]


def resolve_modes(mode: str, engine_boundaries: tuple[str, ...]) -> list[Mode]:
    if mode not in MODES:
        raise errors.CrashcertError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if mode == "auto":
        return ["boundary"] if engine_boundaries else ["blackbox"]
    if mode == "both":
        return ["boundary", "blackbox"] if engine_boundaries else ["blackbox"]
    if mode == "boundary" and not engine_boundaries:
        raise errors.CrashcertError(
            "boundary mode needs an engine that reports boundaries (its description says "
            "boundaries: []); use --mode blackbox"
        )
    return [mode]  # type: ignore[list-item]


def certify(
    lab: shared.Lab,
    scenarios: list[tuple[str, schema.Scenario]],
    *,
    out_dir: pathlib.Path,
    engine_ref: str,
    mode: str = "auto",
    faults: list[str] | None = None,
    points: list[str] | None = None,
    time_kills: int = DEFAULT_TIME_KILLS,
    seed: int = 0,
    jobs: interrupt.Jobs = 2,
    progress: matrix_module.Progress | None = None,
    shard: shard_module.Shard | None = None,
) -> Certification:
    """Run the matrix in each mode; `points` mixes boundary names, world points and `time`.

    With a `shard`, every baseline runs and only the shard's fault trials (a scenario's
    time kills go together to the shard that owns its TIME_KILLS item)."""
    started = time.monotonic()
    faults = faults or ["kill"]
    modes = resolve_modes(mode, lab.engine.boundaries)
    result = Certification(engine=lab.engine.name, engine_ref=engine_ref, modes=modes)
    result.framework, result.framework_version = certify_table.framework_of(lab.engine)
    for chosen in modes:
        mode_lab = lab if chosen == "boundary" else lab.as_black_box()
        wanted = _points_for(chosen, points)
        matrix = matrix_module.run_matrix(
            mode_lab,
            scenarios,
            out_dir=out_dir / chosen,
            engine_ref=engine_ref,
            faults=faults,
            seed=seed,
            jobs=jobs,
            points=wanted,
            progress=progress,
            shard=shard,
        )
        result.trials.extend(CertTrial(chosen, outcome) for outcome in matrix.outcomes)
        result.planned.extend((chosen, scenario, label) for scenario, label in matrix.planned)
        result.unreached.extend(f"{chosen}:{point}" for point in matrix.unreached)
        timed = "kill" in faults and (points is None or TIME in points)
        if chosen == "blackbox" and timed and time_kills > 0:
            baselines = [o for o in matrix.outcomes if not o.spec.plan]
            names = [o.spec.scenario.name for o in baselines]
            result.planned.extend((chosen, name, TIME_KILLS) for name in names)
            if shard is not None:
                baselines = [o for o in baselines if shard.owns(o.spec.scenario.name, TIME_KILLS)]
            outcomes = _time_trials(
                mode_lab, baselines, count=time_kills, seed=seed, jobs=jobs,
                out_dir=out_dir / chosen, progress=progress,
            )  # fmt: skip
            result.trials.extend(CertTrial(chosen, outcome) for outcome in outcomes)
    result.wall_s = time.monotonic() - started
    result.jobs = interrupt.describe(jobs)
    return result


def _points_for(mode: Mode, points: list[str] | None) -> list[str] | None:
    if points is None:
        return None
    if mode == "boundary":
        chosen = [p for p in points if p in boundaries.BOUNDARIES]
    else:
        chosen = [p for p in points if boundaries.is_world_point(p)]
    return chosen or [_NO_POINT]


def _time_trials(
    lab: shared.Lab,
    baselines: list[runner.TrialOutcome],
    *,
    count: int,
    seed: int,
    jobs: interrupt.Jobs,
    out_dir: pathlib.Path,
    progress: matrix_module.Progress | None,
) -> list[runner.TrialOutcome]:
    specs = []
    for baseline in baselines:
        for plan in plan_module.time_plans(baseline.history, count=count, seed=seed):
            label = plan_module.plan_label(plan)
            specs.append(baseline.spec.model_copy(update={"plan": plan, "label": label}))
    done: list[runner.TrialOutcome] = []

    def run(spec: runner.TrialSpec) -> runner.TrialOutcome:
        outcome = runner.run_trial(lab, spec, out_dir=out_dir)
        if progress:
            progress(outcome, len(done) + 1, None)
        done.append(outcome)
        return outcome

    return interrupt.run_pool(run, specs, jobs=jobs)


# --- rendering -------------------------------------------------------------------------


def _class_verdicts(cert: Certification, invariant: str, name: str) -> list[Verdict]:
    return [trial.verdict(invariant) for trial in cert.in_class(name)]


def _invariant_rows(cert: Certification) -> list[narrow.Row]:
    """The table as rows for a narrow log: each invariant's counts, per fault class, and
    the trials where it FAILed or ERRORed named in full."""
    rows = []
    several = len(cert.modes) > 1
    for invariant in cert.invariants:
        overall = cert.verdict_of(invariant)
        notes: list[tuple[terminal.Part, Sequence[narrow.Item]]] = []
        if overall is not Verdict.PASS:  # a PASS row's counts say it all
            by_class = [
                terminal.line(f"{name} ", terminal.counts(_class_verdicts(cert, invariant, name)))
                for name in cert.fault_classes
            ]
            notes.append(("by fault class", by_class))
        for value in (Verdict.FAIL, Verdict.ERROR):
            named = [
                (f"[{t.mode}] " if several else "") + f"{t.scenario} {t.label}"
                for t in cert.trials
                if t.verdict(invariant) is value
            ]
            if named:
                notes.append((terminal.verdict(value, f"{value.value} in"), named))
        verdicts = [trial.verdict(invariant) for trial in cert.trials]
        rows.append(narrow.Row(invariant, overall, terminal.counts(verdicts), notes))
    return rows


def print_certification(cert: Certification, *, console: rich.console.Console) -> None:
    table = rich.table.Table(
        title=f"{cert.engine}: invariant x fault class (trials per verdict: P pass, F fail, "
        "I inconclusive, E error)"
    )
    table.add_column("invariant")
    table.add_column("overall")
    classes = cert.fault_classes
    for name in classes:
        table.add_column(name, justify="center")
    for invariant in cert.invariants:
        overall = cert.verdict_of(invariant)
        cells = [terminal.counts(_class_verdicts(cert, invariant, name)) for name in classes]
        table.add_row(invariant, terminal.line(terminal.verdict(overall)), *cells)
    if narrow.grid_fits(console, table):
        console.print(table)
    else:
        title = f"{cert.engine}: per invariant, trials per verdict (P, F, I, E) by fault class"
        narrow.print_rows(console, title, _invariant_rows(cert))
    held = cert.held
    for item in levels.LEVELS[:-1]:
        missing = [i for i in item.requires if i not in held]
        mark = ("holds", "green") if not missing else ("not held", "red")
        rest = f": {', '.join(missing)}" if missing else ""
        console.print(terminal.line(f"  {item.level.value:14} ", mark, rest))
    level = cert.level
    console.print(
        terminal.line(
            (f"level {level.value}", "bold"),
            f": {levels.spec(level).meaning} "
            f"({len(cert.trials)} trials, modes {', '.join(cert.modes)}, {cert.wall_s:.1f}s"
            + (f", jobs {cert.jobs})" if cert.jobs else ")"),
        )
    )
    for trial in cert.failing():
        bad = [r for r in trial.checks() if r.verdict in (Verdict.FAIL, Verdict.ERROR)]
        console.print(
            f"  [{trial.mode}] {trial.scenario} {trial.label}: "
            + ", ".join(f"{r.invariant}={r.verdict.value}" for r in bad)
            + f"\n    rerun: {trial.repro}",
            markup=False,  # `[boundary]` is text, not a style
            highlight=False,
        )
        first = next((r for r in bad if r.verdict is Verdict.FAIL), bad[0])
        # Evidence is plain text (it may hold brackets) and names files in the trial
        # directory, e.g. workers/*.log of a worker that crashed.
        console.print(
            f"    why: {first.invariant}: {first.summary}\n    trial: {trial.directory}",
            markup=False,
            highlight=False,
        )
    if cert.errors:
        errors = terminal.verdict(Verdict.ERROR, f"{len(cert.errors)} trial(s) ERROR")
        console.print(terminal.line(errors, ": the harness broke"))
    if cert.unreached:
        unreached = terminal.verdict(Verdict.INCONCLUSIVE, "declared but never reached")
        console.print(terminal.line(unreached, f": {', '.join(cert.unreached)}"))


def to_json(cert: Certification) -> dict[str, Any]:
    held = cert.held
    return {
        "engine": cert.engine,
        "engine_ref": cert.engine_ref,
        "framework": cert.framework,
        "framework_version": cert.framework_version,
        "date": cert.date,
        "level": cert.level.value,
        "badge": levels.badge(cert.level),
        "modes": list(cert.modes),
        "levels": [
            {
                "level": item.level.value,
                "requires": list(item.requires),
                "meaning": item.meaning,
                "holds": set(item.requires) <= held,
                "not_held": [i for i in item.requires if i not in held],
            }
            for item in levels.LEVELS
        ],
        "invariants": {
            invariant: {
                "verdict": cert.verdict_of(invariant).value,
                "by_fault_class": {
                    name: terminal.counts(_class_verdicts(cert, invariant, name)).plain
                    for name in cert.fault_classes
                },
                "first_problem": certify_table.first_problem(cert, invariant),
            }
            for invariant in cert.invariants
        },
        "failing": [
            {
                "mode": trial.mode,
                "scenario": trial.scenario,
                "label": trial.label,
                "invariants": {
                    r.invariant: r.verdict.value
                    for r in trial.checks()
                    if r.verdict is not Verdict.PASS
                },
                "summary": next(
                    (r.summary for r in trial.checks() if r.verdict is Verdict.FAIL), ""
                ),
                "repro": trial.repro,
                "directory": trial.directory,
            }
            for trial in cert.failing()
        ],
        "trials": [
            {"mode": trial.mode, "fault_class": trial.fault_class, **trial.json()}
            for trial in cert.trials
        ],
        "errors": len(cert.errors),
        "not_applied": [t.label for t in cert.not_applied],
        "unreached": cert.unreached,
        "wall_s": round(cert.wall_s, 3),
        "jobs": cert.jobs,
    }


def write_json(path: pathlib.Path, cert: Certification) -> None:
    path.write_text(json.dumps(to_json(cert), indent=2) + "\n")


def to_markdown(cert: Certification) -> str:
    level = cert.level
    held = cert.held
    lines = [
        f"# crashcert certification: {cert.engine}",
        "",
        levels.badge(level),
        "",
        f"**Level {level.value}**: {levels.spec(level).meaning}.",
        "",
        f"{len(cert.trials)} trials in {cert.wall_s:.1f}s; modes: {', '.join(cert.modes)}; "
        f"scenarios: {', '.join(sorted({t.scenario for t in cert.trials}))}.",
        "",
        "| level | holds | invariants not held |",
        "|---|---|---|",
    ]
    for item in levels.LEVELS[:-1]:
        missing = [i for i in item.requires if i not in held]
        lines.append(
            f"| {item.level.value} | {'yes' if not missing else 'no'} | "
            f"{', '.join(missing) or '-'} |"
        )
    classes = cert.fault_classes
    lines += [
        "",
        "| invariant | overall | " + " | ".join(classes) + " |",
        "|---|---|" + "---|" * len(classes),
    ]
    for invariant in cert.invariants:
        cells = [terminal.counts(_class_verdicts(cert, invariant, name)).plain for name in classes]
        lines.append(
            f"| {invariant} | {cert.verdict_of(invariant).value} | " + " | ".join(cells) + " |"
        )
    failing = cert.failing()
    if failing:
        lines += ["", "## Failing cases", ""]
        for trial in failing:
            bad = [r for r in trial.checks() if r.verdict in (Verdict.FAIL, Verdict.ERROR)]
            first = next((r for r in bad if r.verdict is Verdict.FAIL), bad[0])
            lines.append(
                f"- [{trial.mode}] {trial.scenario} `{trial.label}`: "
                + ", ".join(f"{r.invariant} {r.verdict.value}" for r in bad)
                + f"; {first.invariant}: {first.summary}"
            )
            lines.append(f"  `{trial.repro}`")
    lines += ["", "## Certification table", "", certify_table.HEADER, *certify_table.rows(cert)]
    return "\n".join(lines) + "\n"


def write_markdown(path: pathlib.Path, cert: Certification) -> None:
    path.write_text(to_markdown(cert))
