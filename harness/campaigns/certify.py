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
from typing import Any

import rich.console
import rich.table

from harness import checkers, errors
from harness.campaigns import cert_trial, coverage
from harness.campaigns import matrix as matrix_module
from harness.checkers import levels, verdict
from harness.contract import boundaries
from harness.engines import capabilities
from harness.faults import spec as fault_spec
from harness.lab import shared
from harness.planning import plan as plan_module
from harness.planning import shard as shard_module
from harness.report import certify_table, narrow, terminal
from harness.scenario import schema
from harness.trial import interrupt, runner

Mode = cert_trial.Mode
MODES: tuple[str, ...] = ("auto", "boundary", "blackbox", "both")
DEFAULT_TIME_KILLS = 2
# Matches no point: a mode whose points were all filtered out runs its baselines only.
_NO_POINT = "-"
TIME = cert_trial.TIME
# A shard's plan names a scenario's time kills as one item: their moments come from the
# wall-clock span of the baseline, which differs on every machine; one shard runs them all.
TIME_KILLS = "time kills"
PLAN_APPLIED = cert_trial.PLAN_APPLIED
Verdict = verdict.Verdict


Counted = cert_trial.Counted
CertTrial = cert_trial.CertTrial
Trial = cert_trial.Trial


@dataclasses.dataclass
class Certification:
    engine: str
    engine_ref: str
    modes: list[Mode]
    trials: list[Trial] = dataclasses.field(default_factory=list)
    unreached: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    # A merge's: each shard's own wall time, in shard order (its wall_s is the slowest's).
    shard_wall_s: list[float] = dataclasses.field(default_factory=list)
    # Every trial of the whole plan, (mode, scenario, label) in order, whichever shard runs it.
    planned: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    jobs: str = ""  # how many trials ran at once, as the summary says it
    # For the dated table (certify_table.py): the framework the description names, its
    # installed version, and the day the certification ran (UTC).
    framework: str = ""
    framework_version: str = ""
    date: str = dataclasses.field(default_factory=certify_table.today)
    # The trials its levels ask for (coverage.py), read from the baselines when None.
    required: list[coverage.Required] | None = None
    # Capability the engine does not offer -> the scenarios not run for it.
    not_offered: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def invariants(self) -> tuple[str, ...]:
        return checkers.INVARIANTS

    @property
    def requirements(self) -> list[coverage.Required]:
        if self.required is not None:
            return self.required
        found: list[coverage.Required] = []
        for trial in self.trials:
            outcome = getattr(trial, "outcome", None)
            if outcome is not None and not outcome.spec.plan:
                found.extend(coverage.required_of(trial.mode, outcome.history))
        return found

    @property
    def coverage(self) -> dict[str, levels.Coverage]:
        return coverage.by_class(self.requirements, self.trials)

    @property
    def faults_run(self) -> list[str]:
        """The fault classes of the trials, in the order they first ran (kill, pause, ...)."""
        names = [t.fault_class.partition("@")[0] for t in self.trials]
        return list(dict.fromkeys(n for n in names if n != "baseline"))

    def verdict_of(self, invariant: str, trials: list[Trial] | None = None) -> Verdict:
        """The worst verdict of `invariant` over the trials (a missing result is an ERROR)."""
        chosen = self.trials if trials is None else trials
        return verdict.worst(trial.verdict(invariant) for trial in chosen)

    @property
    def held(self) -> set[str]:
        """Invariants that PASSed in every trial, none of them on self-reported evidence."""
        passed = {i for i in self.invariants if self.trials and self.verdict_of(i) is Verdict.PASS}
        return passed - set(self.self_reported)

    @property
    def self_reported(self) -> dict[str, int]:
        """Invariant -> trials whose PASS rests only on what the engine said of itself."""
        counts = {i: sum(t.self_reported(i) for t in self.trials) for i in self.invariants}
        return {i: n for i, n in counts.items() if n}

    def not_held(self, item: levels.LevelSpec) -> list[str]:
        """The level's invariants that did not hold, a self-reported one said so."""
        reported = self.self_reported
        return [
            f"{i} (self-reported)" if i in reported else i
            for i in item.requires
            if i not in self.held
        ]

    @property
    def evidence_level(self) -> levels.Level:
        """What the trials that ran showed, before coverage caps it."""
        return levels.grant(self.held)

    @property
    def level(self) -> levels.Level:
        """The evidence, capped at the highest level whose fault classes all struck at
        every applicable point."""
        return levels.earned(self.held, self.coverage)

    @property
    def title(self) -> str:
        """'CRASH-SAFE (FULL needs pause, commit_lost not run)'."""
        return levels.title(self.held, self.coverage)

    @property
    def badge(self) -> str:
        return levels.badge(self.level, self.faults_run)

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
    quick: bool = False,
) -> Certification:
    """Run the matrix in each mode; `points` mixes boundary names, world points and `time`.

    Without `faults` and `points`, every trial the top level asks for (levels.py, at the
    points it asks for them); `quick`, the declared smaller set levels.QUICK_CLASSES, which
    can never earn FULL; `points` alone, kills there (as it always meant). With a `shard`,
    every baseline runs and only the shard's fault trials (a scenario's time kills go
    together to the shard that owns its TIME_KILLS item)."""
    started = time.monotonic()
    modes = resolve_modes(mode, lab.engine.boundaries)
    result = Certification(engine=lab.engine.name, engine_ref=engine_ref, modes=modes)
    result.framework, result.framework_version = certify_table.framework_of(lab.engine)
    result.required = []
    scenarios = _offered(scenarios, capabilities.offered(lab.engine), result.not_offered)
    for chosen in modes:
        mode_lab = lab if chosen == "boundary" else lab.as_black_box()
        wanted = _points_for(chosen, points)
        classes, select = _plan_for(chosen, faults, points, quick=quick)
        matrix = matrix_module.run_matrix(
            mode_lab,
            scenarios,
            out_dir=out_dir / chosen,
            engine_ref=engine_ref,
            faults=classes,
            seed=seed,
            jobs=jobs,
            points=wanted,
            progress=progress,
            shard=shard,
            select=select,
        )
        result.trials.extend(CertTrial(chosen, outcome) for outcome in matrix.outcomes)
        for outcome in (o for o in matrix.outcomes if not o.spec.plan):
            result.required.extend(coverage.required_of(chosen, outcome.history))
        result.planned.extend((chosen, scenario, label) for scenario, label in matrix.planned)
        result.unreached.extend(f"{chosen}:{point}" for point in matrix.unreached)
        for named, lacking in matrix.not_run.items():  # a fault class the engine cannot take
            for name in lacking:
                listed = result.not_offered.setdefault(name, [])
                listed.extend([] if named in listed else [named])
        timed = "kill" in classes and (points is None or TIME in points)
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


def _offered(
    scenarios: list[tuple[str, schema.Scenario]],
    offers: frozenset[str] | None,
    not_offered: dict[str, list[str]],
) -> list[tuple[str, schema.Scenario]]:
    """The scenarios the engine can run; each other one is listed under what it lacks."""
    kept = []
    for reference, scenario in scenarios:
        lacking = capabilities.missing(scenario, offers)
        for name in lacking:
            not_offered.setdefault(name, []).append(scenario.name)
        if not lacking:
            kept.append((reference, scenario))
    return kept


def _plan_for(
    mode: Mode, faults: list[str] | None, points: list[str] | None, *, quick: bool
) -> tuple[list[str], matrix_module.Select | None]:
    """The classes to plan in `mode` and which of their trials to keep: a plain or quick
    certification only those its levels ask for; explicit faults or points, all of them."""
    if faults is None and points is None:
        mode_classes = coverage.classes_for(mode)
        chosen = levels.QUICK_CLASSES if quick else mode_classes
        return [f for f in mode_classes if f in chosen], _required_step
    return list(faults or ["kill"]), None


def _required_step(steps: list[fault_spec.FaultStep]) -> bool:
    return levels.required_at(steps[0].action, steps[0].point)


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
    for item in levels.LEVELS[:-1]:
        short = levels.short_of(item.level, cert.coverage)
        missing = cert.not_held(item) + ([levels.joined(short)] if short else [])
        mark = ("holds", "green") if not missing else ("not held", "red")
        rest = f": {', '.join(missing)}" if missing else ""
        console.print(terminal.line(f"  {item.level.value:14} ", mark, rest))
    for line in coverage_lines(cert):
        console.print(f"  {line}", markup=False, highlight=False)
    level = cert.level
    console.print(
        terminal.line(
            (f"level {cert.title}", "bold"),
            f": {levels.spec(level).meaning} "
            f"({timing(cert)}, modes {', '.join(cert.modes)}"
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


def coverage_lines(cert: Certification) -> list[str]:
    """'faults run: kill, pause' and, per scenario, required trials struck / required."""
    lines = [f"faults run: {', '.join(cert.faults_run) or 'none'}"]
    for name, names in cert.not_offered.items():
        lines.append(
            f"not offered: {name} ({', '.join(names)} not run): "
            f"{capabilities.UNPROVEN.get(name, name)} unproven"
        )
    for invariant, count in cert.self_reported.items():
        lines.append(
            f"{invariant}: self-reported in {count} trial(s) (the engine's own "
            "detail.frontier_version, no checkpoints table exported to check it against): "
            "not counted toward a level"
        )
    per_scenario = coverage.by_scenario(cert.requirements, cert.trials)
    lines += [f"coverage {name}: {coverage.line(c)}" for name, c in per_scenario.items()]
    return lines


def to_json(cert: Certification) -> dict[str, Any]:
    covered = cert.coverage
    return {
        "engine": cert.engine,
        "engine_ref": cert.engine_ref,
        "framework": cert.framework,
        "framework_version": cert.framework_version,
        "date": cert.date,
        "level": cert.level.value,
        "title": cert.title,
        "evidence_level": cert.evidence_level.value,
        "badge": cert.badge,
        "modes": list(cert.modes),
        "faults_run": cert.faults_run,
        "coverage": {
            "by_class": {fault: c.text() for fault, c in covered.items()},
            "by_scenario": {
                name: {fault: c.text() for fault, c in per.items()}
                for name, per in coverage.by_scenario(cert.requirements, cert.trials).items()
            },
        },
        "required": [item.json() for item in cert.requirements],
        "not_offered": cert.not_offered,
        "levels": [
            {
                "level": item.level.value,
                "requires": list(item.requires),
                "fault_classes": list(levels.required_classes(item.level)),
                "meaning": item.meaning,
                "holds": cert.level is item.level
                or levels.rank(cert.level) > levels.rank(item.level),
                "not_held": cert.not_held(item),
                "not_covered": levels.short_of(item.level, covered),
            }
            for item in levels.LEVELS
        ],
        "invariants": {
            invariant: {
                "verdict": cert.verdict_of(invariant).value,
                "self_reported": invariant in cert.self_reported,
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
        "shard_wall_s": [round(wall, 3) for wall in cert.shard_wall_s],
        "jobs": cert.jobs,
    }


def write_json(path: pathlib.Path, cert: Certification) -> None:
    path.write_text(json.dumps(to_json(cert), indent=2) + "\n")


def timing(cert: Certification) -> str:
    """How many trials and how long: a merge's wall time is its slowest shard's, as if the
    shards ran at once on runners of their own, so it says so and gives their sum too."""
    if not cert.shard_wall_s:
        return f"{len(cert.trials)} trials in {cert.wall_s:.1f}s"
    return (
        f"{len(cert.trials)} trials from {len(cert.shard_wall_s)} shards "
        f"(slowest {max(cert.shard_wall_s):.1f}s, {sum(cert.shard_wall_s):.1f}s in all)"
    )


def to_markdown(cert: Certification) -> str:
    level = cert.level
    lines = [
        f"# crashcert certification: {cert.engine}",
        "",
        cert.badge,
        "",
        f"**Level {cert.title}**: {levels.spec(level).meaning}.",
        "",
        f"{timing(cert)}; modes: {', '.join(cert.modes)}; "
        f"scenarios: {', '.join(sorted({t.scenario for t in cert.trials}))}.",
        "",
        *(f"- {line}" for line in coverage_lines(cert)),
        "",
        "| level | holds | invariants not held | fault classes not covered |",
        "|---|---|---|---|",
    ]
    for item in levels.LEVELS[:-1]:
        missing = cert.not_held(item)
        short = levels.short_of(item.level, cert.coverage)
        lines.append(
            f"| {item.level.value} | {'yes' if not (missing or short) else 'no'} | "
            f"{', '.join(missing) or '-'} | {', '.join(short) or '-'} |"
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
