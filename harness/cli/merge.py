"""`crashcert merge DIR...`: one report from the shards of a crash matrix, a certification
or an exploration (each shard's shard.json says which)."""

from __future__ import annotations

import json
import pathlib
import sys

import click

from harness.campaigns import certify as certify_module
from harness.checkers import verdict as verdict_module
from harness.cli import certify, options
from harness.planning import shard
from harness.report import github, narrow, summary, terminal
from harness.shards import merge as merge_module
from harness.shards import merge_certify, merge_explore

DEFAULT_OUT = "crashcert-merged"
console = terminal.make_console()


@click.command()
@click.argument("directories", nargs=-1, required=True, type=click.Path(exists=True))
@options.file_option("--json", "json_path", "Write the merged JSON report here.")
@options.file_option("--junit", "junit_path", "Write the merged JUnit XML report here.")
@options.file_option("--markdown", "markdown_path", "Certify shards: a Markdown summary.")
@certify.require_option
@click.option(
    "--out",
    default=DEFAULT_OUT,
    show_default=True,
    callback=options.out_callback,
    help="Write the merged HTML report (report.html) here.",
)
def merge(
    directories: tuple[str, ...],
    json_path: str | None,
    junit_path: str | None,
    markdown_path: str | None,
    required: str | None,
    out: str,
) -> None:
    """Merge the output directories of `crashcert matrix|certify|explore --shard I/N` runs.

    Refuses shards of different plans or crashcert versions, and an incomplete set.
    Exit code: a matrix's (0 PASS, 1 FAIL, 2 INCONCLUSIVE, 3 ERROR); a certification's
    (0, 1 below --require, 3 a trial ERROR), its level computed from the merged trials;
    an exploration's (0 none failed, 1 a reproducible failure, 2 FLAKY, 3 ERROR).
    """
    reports = merge_module.find([pathlib.Path(d) for d in directories])
    kind = reports[0].kind
    if kind == shard.CERTIFY:
        _certification(reports, json_path, junit_path, markdown_path, required)
    elif kind == shard.EXPLORE:
        _exploration(reports, json_path)
    _matrix(reports, json_path, junit_path, out)


def _certification(
    reports: list[merge_module.ShardReport],
    json_path: str | None,
    junit_path: str | None,
    markdown_path: str | None,
    required: str | None,
) -> None:
    result = merge_certify.combine(reports)
    certify_module.print_certification(result, console=console)
    console.print(f"{len(reports)} certify shards merged")
    if junit_path:
        pathlib.Path(junit_path).parent.mkdir(parents=True, exist_ok=True)
        summary.write_junit_records(pathlib.Path(junit_path), [t.json() for t in result.trials])
    certify.finish(result, json_path=json_path, markdown_path=markdown_path, required=required)


def _exploration(reports: list[merge_module.ShardReport], json_path: str | None) -> None:
    merged = merge_explore.combine(reports)
    for line in merge_explore.render(merged):
        console.print(line, markup=False, highlight=False)
    if json_path:
        pathlib.Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(json_path).write_text(json.dumps(merged, indent=2) + "\n")
    sys.exit(merged["exit_code"])


def _matrix(
    reports: list[merge_module.ShardReport],
    json_path: str | None,
    junit_path: str | None,
    out: str,
) -> None:
    from harness.report import timeline

    document = merge_module.merge(reports)
    trials = document["trials"]
    for path in (json_path, junit_path):
        if path:
            pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    if json_path:
        pathlib.Path(json_path).write_text(json.dumps(document, indent=2) + "\n")
    if junit_path:
        summary.write_junit_records(pathlib.Path(junit_path), trials)
    named = [pathlib.Path(t["directory"]) for t in trials if t.get("directory")]
    held = [path for path in named if path.is_dir()]
    page = timeline.write_matrix_report(
        options.absolute(out),
        [timeline.load_view(directory) for directory in held],
        unreached=document["unreached"],
        title=f"crashcert matrix ({len(reports)} shards merged)",
        not_run=document["not_run"],
    )
    verdict = verdict_module.Verdict(document["verdict"])
    labelled = [(t["scenario"], t["label"], verdict_module.Verdict(t["verdict"])) for t in trials]
    narrow.print_rows(console, summary.ROWS_TITLE, summary.scenario_rows(labelled))
    for trial in trials:
        if trial["verdict"] != verdict_module.Verdict.PASS.value:
            console.print(
                terminal.line(
                    terminal.verdict(verdict_module.Verdict(trial["verdict"])),
                    f" {trial['scenario']} {trial['label']}\n  rerun: {trial['repro']}",
                )
            )
    for line in summary.not_run_lines(document["not_run"]):
        console.print(terminal.line(terminal.verdict(verdict_module.Verdict.INCONCLUSIVE), line))
    unreached = ", ".join(document["unreached"])
    github.publish(
        f"crashcert matrix ({len(reports)} shards merged): {verdict.value}",
        [f"{len(trials)} trials from {len(reports)} shards."]
        + ([f"Declared but never reached: {unreached}."] if unreached else []),
        github.from_records(trials),
    )
    if len(held) < len(trials):
        console.print(f"{len(trials) - len(held)} trial directories not here: not in {page}")
    console.print(
        f"{len(trials)} trials from {len(reports)} shards (slowest {document['wall_s']:.1f}s): "
        f"{verdict.value}\nreport: {page}"
    )
    sys.exit(verdict.exit_code)
