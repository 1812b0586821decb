"""`crashcert certify`: which guarantees an engine keeps, and its level
(harness/campaigns/certify.py); with --shard I/N, one shard of it for `crashcert merge`."""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import click

from harness.campaigns import certify as certify_module
from harness.checkers import levels, verdict
from harness.cli import options
from harness.contract import boundaries
from harness.engines import commands
from harness.faults import spec as fault_spec
from harness.lab import faketime, shared
from harness.planning import plan
from harness.planning import shard as shard_module
from harness.report import github, terminal
from harness.trial import interrupt

console = terminal.make_console()
LEVEL_NAMES = ["FULL", "CRASH-SAFE", "AT-LEAST-ONCE", "NONE"]


def require_option(function: Any) -> Any:
    return click.option(
        "--require",
        "required",
        type=click.Choice(LEVEL_NAMES, case_sensitive=False),
        default=None,
        help="Exit 1 when the engine earns a lower level than this.",
    )(function)


@click.command()
@options.engine_option
@options.scenario_option(multiple=True)
@click.option(
    "--faults",
    default=None,
    help=options.FAULTS_HELP
    + " Default: every class the top level asks for, where it asks for it (with --points: kill).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Only kills and resubmits (levels.QUICK_CLASSES): cheaper, and never FULL.",
)
@click.option(
    "--mode",
    type=click.Choice(["auto", "boundary", "blackbox", "both"]),
    default="auto",
    show_default=True,
    help="auto: boundary mode when the engine reports boundaries, black box otherwise.",
)
@click.option(
    "--points",
    default=None,
    help="Only these points (boundary names, world:model.answered, world:tool.effect, "
    "world:reply.accepted, time), comma-separated.",
)
@click.option(
    "--time-kills", default=2, show_default=True, help="Seeded time kills per scenario (black box)."
)
@require_option
@options.file_option("--json", "json_path", "Write the certification as JSON here.")
@options.file_option("--markdown", "markdown_path", "Write a Markdown summary here.")
@options.out_option
@click.option("--seed", default=0, show_default=True)
@options.jobs_option
@options.shard_option
@options.pg_option
def certify(
    engine_ref: str,
    scenario_names: tuple[str, ...],
    faults: str | None,
    quick: bool,
    mode: str,
    points: str | None,
    time_kills: int,
    required: str | None,
    json_path: str | None,
    markdown_path: str | None,
    out: str | None,
    seed: int,
    jobs: interrupt.Jobs,
    shard_text: str | None,
    pg_dsn: str | None,
) -> None:
    """Certify an engine: which guarantees hold, per invariant and fault class, and its level.

    Plain, it runs every fault class the top level asks for at every point where it asks for
    it (harness/checkers/levels.py); --quick, kills and resubmits only (never FULL); --faults
    or --points, what they name, and the level is capped at what that covers.

    Exit 0 when the certification ran (whatever the level), 1 when --require names a higher
    level than the engine earned, 3 when a trial ended ERROR (the harness or environment broke).
    A shard's level is its trials' only: `crashcert merge` certifies the whole.
    """
    shard = shard_module.parse(shard_text) if shard_text is not None else None  # '' too
    if quick and faults:
        raise click.UsageError("--quick is a declared set of faults: give it or --faults")
    fault_classes = fault_spec.parse_classes(faults) if faults else None
    faketime.require(fault_classes or [])  # no libfaketime: say so once, before any trial
    options.refuse_pg_restart(
        pg_dsn, asked=options.stops_postgres(fault_classes or []), how="--faults"
    )
    point_names = plan.parse_points(
        points, known=[*boundaries.BOUNDARIES, *boundaries.WORLD_POINTS, certify_module.TIME]
    )
    engine = commands.find(engine_ref)
    scenarios = options.scenarios(scenario_names)
    out_dir = options.new_out_dir(out)
    network = options.private_network(pg_dsn)
    with shared.open_lab(engine, pg_dsn=pg_dsn) as lab:
        console.print(
            f"certifying {engine.name}: {lab.toxiproxy_note}; {network.note}; trials in {out_dir}"
        )
        result = certify_module.certify(
            lab,
            scenarios,
            out_dir=out_dir,
            engine_ref=engine_ref,
            mode=mode,
            faults=fault_classes,
            points=point_names or None,
            time_kills=time_kills,
            seed=seed,
            jobs=jobs,
            shard=shard,
            quick=quick,
        )
    certify_module.print_certification(result, console=console)
    if shard is not None:
        record = {
            **shard_module.record(
                shard,
                engine=engine.name,
                seed=seed,
                planned=result.planned,
                kind=shard_module.CERTIFY,
            ),
            "out_dir": str(out_dir),
        }
        document = {**certify_module.to_json(result), "shard": record}
        (out_dir / shard_module.RECORD).write_text(json.dumps(document, indent=2) + "\n")
        console.print(f"shard {shard}: {out_dir / shard_module.RECORD}")
    finish(result, json_path=json_path, markdown_path=markdown_path, required=required)


def finish(
    result: certify_module.Certification,
    *,
    json_path: str | None,
    markdown_path: str | None,
    required: str | None,
) -> None:
    """Write the reports and exit as certify does (a merge of certify shards too)."""
    for path in (json_path, markdown_path):
        if path:
            pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    if json_path:
        certify_module.write_json(pathlib.Path(json_path), result)
    if markdown_path:
        certify_module.write_markdown(pathlib.Path(markdown_path), result)
    not_held = [i for i in result.invariants if i not in result.held]
    github.publish(
        f"crashcert certify {result.engine}: level {result.level.value}",
        [
            f"{levels.spec(result.level).meaning} ({len(result.trials)} trials, "
            f"modes {', '.join(result.modes)})",
            *([f"Invariants not held: {', '.join(not_held)}."] if not_held else []),
        ],
        github.from_records(
            ({"mode": t.mode, **t.json()} for t in result.trials), mode=len(result.modes) > 1
        ),
    )
    if result.errors:
        sys.exit(verdict.Verdict.ERROR.exit_code)
    if required and levels.rank(result.level) < levels.rank(levels.parse(required)):
        short = f"required {required.upper()}, earned {result.level.value}"
        console.print(terminal.line((short, "bold red")))
        sys.exit(1)
    sys.exit(0)
