"""`crashcert merge DIR...`: one report from the shards of a crash matrix."""

from __future__ import annotations

import json
import pathlib
import sys

import click

from harness.campaigns import merge as merge_module
from harness.checkers import verdict as verdict_module
from harness.cli import options
from harness.report import summary, terminal

DEFAULT_OUT = "crashcert-merged"


@click.command()
@click.argument("directories", nargs=-1, required=True, type=click.Path(exists=True))
@options.file_option("--json", "json_path", "Write the merged JSON report here.")
@options.file_option("--junit", "junit_path", "Write the merged JUnit XML report here.")
@click.option(
    "--out",
    default=DEFAULT_OUT,
    show_default=True,
    help="Write the merged HTML report (report.html) here.",
)
def merge(
    directories: tuple[str, ...], json_path: str | None, junit_path: str | None, out: str
) -> None:
    """Merge the output directories of `crashcert matrix --shard I/N` runs into one report.

    Refuses shards of different plans or crashcert versions, and an incomplete set.
    Exit code: the merged matrix's (0 PASS, 1 FAIL, 2 INCONCLUSIVE, 3 ERROR).
    """
    from harness.report import timeline

    console = terminal.make_console()
    reports = merge_module.find([pathlib.Path(d) for d in directories])
    document = merge_module.merge(reports)
    trials = document["trials"]
    for path in (json_path, junit_path):
        if path:
            pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(document, indent=2) + "\n")
    if junit_path:
        summary.write_junit_records(pathlib.Path(junit_path), trials)
    held = [pathlib.Path(t["directory"]) for t in trials if pathlib.Path(t["directory"]).is_dir()]
    page = timeline.write_matrix_report(
        options.absolute(out),
        [timeline.load_view(directory) for directory in held],
        unreached=document["unreached"],
        title=f"crashcert matrix ({len(reports)} shards merged)",
    )
    verdict = verdict_module.Verdict(document["verdict"])
    for trial in trials:
        if trial["verdict"] != verdict_module.Verdict.PASS.value:
            console.print(
                terminal.line(
                    terminal.verdict(verdict_module.Verdict(trial["verdict"])),
                    f" {trial['scenario']} {trial['label']}\n  rerun: {trial['repro']}",
                )
            )
    if len(held) < len(trials):
        console.print(f"{len(trials) - len(held)} trial directories not here: not in {page}")
    console.print(
        f"{len(trials)} trials from {len(reports)} shards (slowest {document['wall_s']:.1f}s): "
        f"{verdict.value}\nreport: {page}"
    )
    sys.exit(verdict.exit_code)
