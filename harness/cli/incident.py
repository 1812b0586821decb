"""`crashcert incident export` and `crashcert replay`: a run turned into a scenario, and
that scenario replayed under its faults (harness/incident/incident.py, harness/INCIDENTS.md)."""

from __future__ import annotations

import pathlib
import sys

import click

from harness import errors
from harness.cli import options
from harness.engines import commands
from harness.incident import replay as replay_module
from harness.incident import variants
from harness.inputs import readers, validation
from harness.lab import shared
from harness.report import terminal
from harness.scenario import schema
from harness.trial import runner

console = terminal.make_console()


@click.group("incident")
def incident_group() -> None:
    """Turn one run of an engine, or its trace, into a replayable scenario
    (harness/INCIDENTS.md)."""


@incident_group.command("export")
@options.engine_option
@click.option("--dsn", default=None, help="The engine's database (libpq DSN).")
@click.option("--run", "run_id", default=None, help="The run's id (with --dsn).")
@click.option(
    "--trial",
    "trial_dir",
    default=None,
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="A stored trial directory instead of a database (its run's stored tables).",
)
@click.option("--redact", is_flag=True, help="Replace prompts and outputs by same-shape text.")
@click.option("--name", default=None, help="Scenario name (default incident-<run id>).")
@click.option(
    "--sink-queryable/--sink-not-queryable",
    default=None,
    help="Whether the reply sink can be asked by key (default: inferred, else true).",
)
def incident_export(
    engine_ref: str,
    dsn: str | None,
    run_id: str | None,
    trial_dir: str | None,
    redact: bool,
    name: str | None,
    sink_queryable: bool | None,
) -> None:
    """Print a scenario YAML that replays a run: its model decisions, tool results, faults."""
    from harness.incident import applied, incident

    if trial_dir is not None:
        if dsn is not None:
            raise errors.CrashcertError("give either --trial or --dsn/--run, not both")
        # a trial knows the faults it applied: no inference
        scenario = applied.scenario_from_trial(
            pathlib.Path(trial_dir), name=name, redacted=redact, sink_queryable=sink_queryable
        )
    elif dsn is not None and run_id is not None:
        tables = incident.from_dsn(dsn, run_id, engine_ref=engine_ref)
        scenario = incident.scenario_from_tables(
            tables,
            name=name,
            redacted=redact,
            sink_queryable=sink_queryable,
            source="the engine's database",
        )
    else:
        raise errors.CrashcertError("give --dsn DSN --run RUN_ID, or --trial DIR")
    click.echo(incident.to_yaml(scenario), nl=False)


@click.command()
@options.engine_option
@options.file_argument("scenario_file")
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--no-variants",
    is_flag=True,
    help="Replay only the scenario's faults, not its variants.",
)
@options.out_option
@options.pg_option
def replay(
    engine_ref: str,
    scenario_file: str,
    seed: int,
    no_variants: bool,
    out: str | None,
    pg_dsn: str | None,
) -> None:
    """Replay an incident scenario under its faults and each of its variants; say whether
    the incident still happens, and under which plan."""
    scenario = schema.load(scenario_file)
    engine = commands.find(engine_ref)
    network = options.private_network(pg_dsn)
    out_dir = options.new_out_dir(out)

    def show(what: str, spec: runner.TrialSpec, outcome: runner.TrialOutcome | None) -> None:
        if outcome is None:
            console.print(f"\n{what}: {spec.label}")
            return
        terminal.print_results(console, outcome.results, outcome.verdict)
        console.print(f"trial: {outcome.directory}\nrerun: {outcome.repro}")

    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(f"engine {engine.name}: {lab.toxiproxy_note}; {network.note}")
        replays = replay_module.replay(
            lab,
            scenario,
            replay_module.plans_of(scenario, with_variants=not no_variants),
            scenario_ref=scenario_file,
            engine_ref=engine_ref,
            seed=seed,
            out_dir=out_dir,
            show=show,
        )
    verdict, sentence = variants.conclude(replays)
    if len(replays) > 1:
        console.print()
        for replayed in replays:
            named = f"  {', '.join(replayed.failed)}" if replayed.failed else ""
            console.print(f"{replayed.verdict.value:12} {replayed.label}{named}")
    console.print(sentence)
    sys.exit(verdict.exit_code)


@incident_group.command("import")
@click.option(
    "--otlp",
    "otlp_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, resolve_path=True),
    help="An OTLP JSON trace file (one JSON object, or JSON lines as the file exporter writes).",
)
@click.option(
    "--run", "run_id", default=None, help="The run: its gen_ai.conversation.id or trace id."
)
@click.option("--name", default=None, help="Scenario name (default incident-<run id>).")
def incident_import(otlp_file: str, run_id: str | None, name: str | None) -> None:
    """Print a scenario YAML that replays a run traced with OpenTelemetry GenAI spans:
    its model decisions, tool results, the faults the trace shows and the variants it
    cannot rule out (harness/INCIDENTS.md)."""
    from harness.incident import incident, otlp, trace_incident

    data = readers.read_bytes(otlp_file, what="an OTLP trace", max_bytes=otlp.MAX_TRACE_BYTES)
    text = data.decode("utf-8", errors="replace")
    scenario = trace_incident.scenario_from_spans(
        otlp.parse(text), run=run_id, name=name, source=f"trace {otlp_file}"
    )
    made = incident.to_yaml(scenario)
    if len(made.encode()) > validation.MAX_YAML_BYTES:
        # What `scenarios validate` would refuse is no import: say so now, print nothing.
        raise errors.CrashcertError(
            f"{otlp_file}: the scenario this trace makes is larger than "
            f"{validation.MAX_YAML_BYTES} bytes, which no scenario may be; pass --run to pick "
            "one run of the trace"
        )
    click.echo(made, nl=False)
