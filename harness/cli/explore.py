"""`crashcert explore`: Hypothesis-generated fault schedules, a failure shrunk to its minimum
(harness/campaigns/explore.py); with --shard I/N, one shard of it for `crashcert merge`."""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import click

from harness.checkers import verdict as verdict_module
from harness.cli import options
from harness.engines import capabilities, commands
from harness.faults import spec as fault_spec
from harness.lab import faketime, shared
from harness.planning import plan
from harness.planning import shard as shard_module
from harness.report import terminal
from harness.scenario import schema as scenario_module

console = terminal.make_console()


@click.command()
@options.engine_option
@options.scenario_option(required=True)
@click.option(
    "--examples",
    default=50,
    show_default=True,
    type=click.IntRange(1, 100_000),  # refused before a cluster starts
    help="Fault schedules to generate.",
)
@click.option("--seed", default=0, show_default=True, help="Decides the generated schedules.")
@click.option("--faults", default="kill,pause", show_default=True, help=options.FAULTS_DRAWN_HELP)
@click.option(
    "--max-faults",
    default=3,
    show_default=True,
    type=click.IntRange(1, 50),
    help="Most faults per schedule.",
)
@click.option(
    "--points",
    default=None,
    help="Only fault these boundaries (comma-separated names, e.g. tools.pending,reply.sent).",
)
@click.option(
    "--shrink-budget",
    default=12,
    show_default=True,
    type=click.IntRange(0, 10_000),
    help="Most trials spent shrinking.",
)
@click.option(
    "--replays",
    default=2,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Fresh replays of the minimum.",
)
@options.out_option
@options.file_option("--json", "json_path", "Write a JSON summary here.")
@options.shard_option
@options.pg_option
def explore(
    engine_ref: str,
    scenario_name: str,
    examples: int,
    seed: int,
    faults: str,
    max_faults: int,
    points: str | None,
    shrink_budget: int,
    replays: int,
    out: str | None,
    json_path: str | None,
    shard_text: str | None,
    pg_dsn: str | None,
) -> None:
    """Generate fault schedules with Hypothesis; shrink a failure to a minimal reproduction.

    Exit codes: 0 no failure, 1 a reproducible failure, 2 a failure that did not reproduce
    on replay (FLAKY), 3 trials broke (ERROR) without any failure. With --shard I/N, the
    generated schedules are split by name (`crashcert merge` combines the shards).
    """
    from harness.campaigns import explore as explore_module  # Hypothesis: only when exploring

    shard = shard_module.parse(shard_text) if shard_text is not None else None  # '' too
    fault_classes = fault_spec.parse_classes(faults)
    options.refuse_pg_restart(pg_dsn, asked=options.stops_postgres(fault_classes), how="--faults")
    faketime.require(fault_classes)  # no libfaketime: say so once, before any trial
    point_names = plan.parse_points(points)
    scenario = scenario_module.find(scenario_name)
    engine = commands.find(engine_ref)
    unoffered = capabilities.missing_for_faults(fault_classes, capabilities.offered(engine))
    if unoffered:  # not drawn: INCONCLUSIVE for them, never FAIL
        console.print(
            terminal.line(
                terminal.verdict(verdict_module.Verdict.INCONCLUSIVE),
                " " + capabilities.fault_not_run_note(scenario, unoffered),
            )
        )
        fault_classes = [fault for fault in fault_classes if fault not in unoffered]
        if not fault_classes:
            sys.exit(verdict_module.Verdict.INCONCLUSIVE.exit_code)
    out_dir = options.new_out_dir(out)

    def progress(purpose: str, schedule: list[Any], observation: Any) -> None:
        failing = f" ({', '.join(observation.failing)})" if observation.failing else ""
        console.print(
            terminal.line(
                f"{purpose:8} {plan.plan_label(schedule)}: ",
                terminal.verdict(observation.verdict),
                failing,
            )
        )

    network = options.private_network(pg_dsn)
    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(
            f"engine {engine.name}: {lab.toxiproxy_note}; {network.note}; seed {seed}; "
            f"trials in {out_dir}"
        )
        result = explore_module.explore(
            lab,
            scenario,
            out_dir=out_dir,
            examples=examples,
            seed=seed,
            faults=fault_classes,
            max_faults=max_faults,
            points=point_names or None,
            shrink_budget=shrink_budget,
            replays=replays,
            scenario_ref=scenario_name,
            engine_ref=engine_ref,
            progress=progress,
            shard=shard,
        )
    for line in explore_module.render(result):
        console.print(line)
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(explore_module.summary(result), indent=2))
    if shard is not None:
        planned = [[scenario.name, label] for label in result.planned]
        record = {
            **shard_module.record(
                shard, engine=engine.name, seed=seed, planned=planned, kind=shard_module.EXPLORE
            ),
            "out_dir": str(out_dir),
        }
        document = {**explore_module.summary(result), "shard": record}
        (out_dir / shard_module.RECORD).write_text(json.dumps(document, indent=2) + "\n")
        console.print(f"shard {shard}: {out_dir / shard_module.RECORD}")
    sys.exit(result.exit_code)
