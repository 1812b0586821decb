"""`crashcert`: the command line. Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE, 3 ERROR."""

from __future__ import annotations

import json
import logging
import pathlib
import sys
import traceback
from typing import Any

import click
import rich.console
import rich.progress

from harness import errors, provenance
from harness.campaigns import matrix as matrix_module
from harness.checkers import judge
from harness.checkers import verdict as verdict_module
from harness.cli import certify, explore, incident, merge, options
from harness.contract import run_report
from harness.engines import capabilities, commands
from harness.faults import spec as fault_spec
from harness.lab import faketime, shared
from harness.lab.postgres import dsn as pg_dsn
from harness.planning import plan
from harness.planning import shard as shard_module
from harness.report import github, terminal
from harness.report import summary as report
from harness.scenario import catalog as scenario_catalog
from harness.scenario import schema as scenario_module
from harness.trial import artifacts as store
from harness.trial import interrupt
from harness.trial import runner as trial_module

console = terminal.make_console()
_FAULT_HELP = (
    f"ACTION@POINT[#N][?NAME=VALUE&...], e.g. kill@tool.started#1; ACTION: "
    f"{', '.join(fault_spec.NAMES)}."
)
_verbose = False  # set by -v: tracebacks for harness errors


@click.group()
@click.version_option(version=provenance.version(), prog_name="crashcert")
@click.option("-v", "--verbose", is_flag=True, help="Log what the harness does.")
@options.isolation_option
def main(verbose: bool, isolation: str) -> None:
    """crashcert: prove that an AI execution engine survives crashes."""
    global _verbose
    _verbose = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)


@main.command()
@options.engine_option
@options.scenario_option(multiple=True)
@click.option("--faults", default="kill", show_default=True, help=options.FAULTS_HELP)
@click.option(
    "--second-kill", is_flag=True, help="Also kill the recovering worker after it claims."
)
@options.out_option
@options.file_option("--json", "json_path", "Write a JSON report here.")
@options.file_option("--junit", "junit_path", "Write a JUnit XML report here.")
@click.option("--seed", default=0, show_default=True)
@options.jobs_option
@click.option(
    "--points",
    default=None,
    help="Only fault these boundaries (comma-separated names, e.g. reply.sending,reply.sent).",
)
@options.shard_option
@options.pg_option
def matrix(
    engine_ref: str,
    scenario_names: tuple[str, ...],
    faults: str,
    second_kill: bool,
    out: str | None,
    json_path: str | None,
    junit_path: str | None,
    seed: int,
    jobs: interrupt.Jobs,
    points: str | None,
    shard_text: str | None,
    pg_dsn: str | None,
) -> None:
    """Kill workers at every boundary of every scenario, then check every invariant."""
    shard = shard_module.parse(shard_text) if shard_text is not None else None  # '' too
    fault_classes = fault_spec.parse_classes(faults)
    options.refuse_pg_restart(pg_dsn, asked=options.stops_postgres(fault_classes), how="--faults")
    clock_note = faketime.require(fault_classes)  # no libfaketime: say so once, here
    point_names = plan.parse_points(points)
    engine = commands.find(engine_ref)
    scenarios = options.scenarios(scenario_names)
    out_dir = options.new_out_dir(out)
    offers = capabilities.offered(engine)
    if all(capabilities.missing(scenario, offers) for _, scenario in scenarios):
        # nothing the engine can run: no cluster to start, the matrix vouches for nothing
        result = matrix_module.MatrixResult(
            not_run={s.name: capabilities.missing(s, offers) for _, s in scenarios}
        )
        report.print_summary([], console=console, not_run=result.not_run)
        _write_reports([], result, json_path, junit_path)
        sys.exit(result.verdict.exit_code)
    network = options.private_network(pg_dsn)
    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(
            f"engine {engine.name}: {lab.toxiproxy_note}; {network.note}; trials in {out_dir}"
        )
        if clock_note:
            console.print(clock_note)
        with rich.progress.Progress(
            rich.progress.SpinnerColumn(),
            rich.progress.TextColumn("{task.description}"),
            rich.progress.BarColumn(),
            rich.progress.MofNCompleteColumn(),
            rich.progress.TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("baseline", total=None)

            def progress(outcome: trial_module.TrialOutcome, done: int, total: int | None) -> None:
                bar.update(
                    task,
                    completed=done,
                    description=f"{outcome.spec.scenario.name} {outcome.spec.label}: "
                    f"{outcome.verdict.value}",
                )

            result = matrix_module.run_matrix(
                lab,
                scenarios,
                out_dir=out_dir,
                engine_ref=engine_ref,
                faults=fault_classes,
                second_kill=second_kill,
                seed=seed,
                jobs=jobs,
                points=point_names or None,
                progress=progress,
                shard=shard,
            )
    report.print_summary(
        result.outcomes, console=console, unreached=result.unreached, not_run=result.not_run
    )
    durations = sorted(o.history.ended_at - o.history.started_at for o in result.outcomes)
    median = durations[len(durations) // 2] if durations else 0.0
    console.print(
        f"{len(result.outcomes)} trials in {result.wall_s:.1f}s (median {median:.2f}s per trial, "
        f"jobs {result.jobs}): {result.verdict.value}"
    )
    unreached = ", ".join(result.unreached)
    github.publish(
        f"crashcert matrix {engine.name}: {result.verdict.value}",
        [f"{len(result.outcomes)} trials in {result.wall_s:.1f}s (jobs {result.jobs})."]
        + ([f"Declared but never reached: {unreached}."] if unreached else [])
        + [line.strip() + "." for line in report.not_run_lines(result.not_run)],
        github.from_records(report.outcome_json(outcome) for outcome in result.outcomes),
    )
    record = None
    if shard is not None:
        record = {
            **shard_module.record(shard, engine=engine.name, seed=seed, planned=result.planned),
            "out_dir": str(out_dir),
        }
        _write_reports(result.outcomes, result, str(out_dir / shard_module.RECORD), None, record)
        console.print(f"shard {shard}: {out_dir / shard_module.RECORD}")
    _write_reports(result.outcomes, result, json_path, junit_path, record)
    from harness.report import timeline

    page = timeline.write_matrix_report(
        out_dir,
        [timeline.view_of_outcome(outcome) for outcome in result.outcomes],
        unreached=result.unreached,
        not_run=result.not_run,
    )
    console.print(f"report: {page}")
    sys.exit(result.verdict.exit_code)


def _write_reports(
    outcomes: list[trial_module.TrialOutcome],
    result: matrix_module.MatrixResult,
    json_path: str | None,
    junit_path: str | None,
    shard: dict[str, Any] | None = None,
) -> None:
    if json_path:
        report.write_json(
            pathlib.Path(json_path),
            outcomes,
            verdict=result.verdict,
            unreached=result.unreached,
            wall_s=result.wall_s,
            shard=shard,
            not_run=result.not_run,
        )
    if junit_path:
        report.write_junit(pathlib.Path(junit_path), outcomes)


@main.command()
@options.engine_option
@options.scenario_option(required=True)
@click.option("--fault", "fault_texts", multiple=True, help=_FAULT_HELP)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--black-box",
    is_flag=True,
    help="Drive the engine as a black box (no control channel; faults at world points), "
    "as certify's black-box mode does.",
)
@options.out_option
@options.pg_option
def run(
    engine_ref: str,
    scenario_name: str,
    fault_texts: tuple[str, ...],
    seed: int,
    black_box: bool,
    out: str | None,
    pg_dsn: str | None,
) -> None:
    """Run one scenario under one fault plan and print every invariant's verdict."""
    scenario = scenario_module.find(scenario_name)
    engine = commands.find(engine_ref)
    lacking = capabilities.missing(scenario, capabilities.offered(engine))
    if lacking:  # not run, so it proves nothing either way: INCONCLUSIVE, never FAIL
        console.print(
            terminal.line(
                terminal.verdict(verdict_module.Verdict.INCONCLUSIVE),
                " " + capabilities.not_run_note(scenario, lacking),
            )
        )
        sys.exit(verdict_module.Verdict.INCONCLUSIVE.exit_code)
    spec = trial_module.TrialSpec.under(
        scenario,
        fault_texts or scenario.faults,
        seed=seed,
        scenario_ref=scenario_name,
        engine_ref=engine_ref,
    )
    offers = capabilities.offered(engine)
    if unoffered := capabilities.missing_for_faults([s.action for s in spec.plan], offers):
        console.print(
            terminal.line(
                terminal.verdict(verdict_module.Verdict.INCONCLUSIVE),
                " " + capabilities.fault_not_run_note(scenario, unoffered),
            )
        )
        sys.exit(verdict_module.Verdict.INCONCLUSIVE.exit_code)
    restarts = options.stops_postgres(step.action for step in spec.plan)
    options.refuse_pg_restart(pg_dsn, asked=restarts, how=f"scenario {scenario.name}'s faults")
    network = options.private_network(pg_dsn)
    out_dir = options.new_out_dir(out)  # before the lab: a bad --out costs nothing
    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(f"engine {engine.name}: {lab.toxiproxy_note}; {network.note}")
        trial_lab = lab.as_black_box() if black_box else lab
        try:
            outcome = trial_module.run_trial(trial_lab, spec, out_dir=out_dir)
        except trial_module.TrialNotStored as lost:  # the verdict first, then the disk's error
            terminal.print_results(console, lost.outcome.results, lost.outcome.verdict)
            raise
    terminal.print_results(console, outcome.results, outcome.verdict)
    console.print(f"trial: {outcome.directory}\nrerun: {outcome.repro}")
    sys.exit(outcome.verdict.exit_code)


@main.command()
@options.directory_argument("directory")
def analyze(directory: str) -> None:
    """Re-check stored trials offline (a trial directory, or every trial below DIRECTORY)."""
    verdicts = []
    for path in store.find_trials(pathlib.Path(directory)):
        console.print(terminal.line((str(path), "bold")))
        try:
            trial = store.read_history(path / "history.jsonl")
        except errors.CrashcertError as error:  # one bad file must not hide the others
            verdicts.append(verdict_module.Verdict.ERROR)
            console.print(terminal.line(terminal.verdict(verdicts[-1]), f" unreadable: {error}"))
            continue
        results, verdict = judge.judge(trial)
        verdicts.append(verdict)
        terminal.print_results(console, results, verdict)
        if trial.interrupted:
            console.print(terminal.line(("INTERRUPTED", "yellow"), f": {trial.interrupted}"))
    sys.exit(verdict_module.worst(verdicts).exit_code)


@main.group(invoke_without_command=True)
@click.pass_context
def scenarios(context: click.Context) -> None:
    """List the bundled scenarios by group, with why each exists (or `validate FILE...`)."""
    if context.invoked_subcommand is None:
        for line in scenario_catalog.lines(scenario_module.load_all()):
            console.print(line, markup=False, highlight=False)


@scenarios.command()
@click.argument("files", nargs=-1, required=True)
def validate(files: tuple[str, ...]) -> None:
    """Validate scenario files; print each problem with file and field."""
    bad = 0
    for name in files:
        try:
            scenario_module.load(name)
            console.print(f"ok      {name}")
        except errors.CrashcertError as error:
            bad += 1
            console.print(f"invalid {error}")
    sys.exit(verdict_module.Verdict.ERROR.exit_code if bad else 0)  # bad input, not a FAIL


@main.command()
@click.argument("which", type=click.Choice(["run-input", "run-report", "scenario", "engine"]))
def schema(which: str) -> None:
    """Print a JSON schema of the engine contract."""
    models: dict[str, Any] = {
        "run-input": run_report.RunInput,
        "run-report": run_report.RunReport,
        "scenario": scenario_module.Scenario,
        "engine": commands.EngineDescription,
    }
    click.echo(json.dumps(models[which].model_json_schema(), indent=2))


@main.command()
@options.engine_option
@options.scenario_option(default="refund", show_default=True)
@click.option("--runs", default=500, show_default=True)
@click.option("--workers", default=4, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--storm-s", default=120.0, show_default=True, help="How long faults rain.")
@click.option("--pg-restarts", default=2, show_default=True)
@options.out_option
@options.pg_option
def soak(
    engine_ref: str,
    scenario_name: str,
    runs: int,
    workers: int,
    seed: int,
    storm_s: float,
    pg_restarts: int,
    out: str | None,
    pg_dsn: str | None,
) -> None:
    """Many runs, several workers, a seeded storm of kills, pauses, cuts and restarts."""
    from harness.campaigns import soak as soak_module

    soak_module.check_options(  # refused before a cluster starts
        runs=runs,
        workers=workers,
        storm_s=storm_s,
        pg_restarts=pg_restarts,
        settle_s=soak_module.DEFAULT_SETTLE_S,
    )
    options.refuse_pg_restart(pg_dsn, asked=pg_restarts > 0, how=f"--pg-restarts {pg_restarts}")
    engine = commands.find(engine_ref)
    scenario = scenario_module.find(scenario_name)
    console.print(f"soak seed={seed} runs={runs} workers={workers} storm={storm_s}s")
    network = options.private_network(pg_dsn)
    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(f"engine {engine.name}: {lab.toxiproxy_note}; {network.note}")
        result = soak_module.run_soak(
            lab,
            scenario,
            runs=runs,
            workers=workers,
            seed=seed,
            storm_s=storm_s,
            pg_restarts=pg_restarts,
            out_dir=options.new_out_dir(out),
        )
    console.print(result.summary())
    sys.exit(result.verdict.exit_code)


@main.command()
@click.argument("action", type=click.Choice(["build", "path"]))
def toxiproxy(action: str) -> None:
    """Print the Toxiproxy server's path; `build` installs it with Go first if missing."""
    from harness.lab import toxiproxy_server

    sys.exit(toxiproxy_server.main([action]))


def entry() -> None:
    interrupt.stop_on_signals()
    try:
        main(standalone_mode=False, obj=options.ProcessOwner())
    except errors.CrashcertError as error:
        click.echo(f"crashcert: {pg_dsn.redact_text(str(error))}", err=True)
        sys.exit(verdict_module.Verdict.ERROR.exit_code)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(verdict_module.Verdict.ERROR.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("crashcert: stopped", err=True)
        sys.exit(130)
    except Exception as error:  # the harness or its environment broke: ERROR, never FAIL
        if _verbose:
            traceback.print_exc()
        # libpq quotes a DSN it cannot parse, password and all
        detail = pg_dsn.redact_text(str(error)).strip().splitlines()
        reason = f"{type(error).__name__}: {detail[0] if detail else ''}".rstrip(": ")
        hint = "" if _verbose else " (rerun with -v for the traceback)"
        click.echo(f"crashcert: harness or environment error: {reason}{hint}", err=True)
        sys.exit(verdict_module.Verdict.ERROR.exit_code)


# -- timeline reports (harness/report/timeline.py) ------------------------------------------------


@main.command("report")
@options.directory_argument("directory")
def report_command(directory: str) -> None:
    """Write timeline.html into every trial below DIRECTORY (and report.html for many)."""
    from harness.report import timeline

    for path in timeline.report_directory(pathlib.Path(directory)):
        console.print(f"wrote {path}")


main.add_command(incident.incident_group)
main.add_command(incident.replay)
main.add_command(merge.merge)
main.add_command(certify.certify)
main.add_command(explore.explore)
