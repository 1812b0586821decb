"""`crashcert merge` of certify shards under GitHub Actions (no trials run): the step
summary is appended and the failing trial gets one annotation with its rerun line; the
same merge outside GitHub writes neither."""

from __future__ import annotations

import pathlib

import click.testing

from harness.cli import merge
from harness.report import github
from tests.campaigns import test_merge_certify as shards
from tests.campaigns import test_shard_merge as matrix_shards


def invoke(tmp_path: pathlib.Path, env: dict[str, str]) -> click.testing.Result:
    directories = [str(path) for path in shards._write(tmp_path / "shards", 2)]
    out = str(tmp_path / "merged")
    return click.testing.CliRunner().invoke(merge.merge, [*directories, "--out", out], env=env)


def test_a_certify_merge_on_github_writes_the_summary_and_annotates(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "step-summary.md"
    env = {github.SUMMARY_VARIABLE: str(path), "GITHUB_ACTIONS": "true"}
    result = invoke(tmp_path, env)
    assert result.exit_code == 0, result.output
    annotations = [line for line in result.output.splitlines() if line.startswith("::")]
    assert annotations == [
        f"::error title=crashcert refund {shards.BROKEN} (boundary)::"
        f"crashcert run --scenario refund --fault {shards.BROKEN}"
        f"%0AFAIL {shards.REPLY}: s"
    ]
    text = path.read_text()
    assert text.startswith("## crashcert certify e: level AT-LEAST-ONCE\n")
    assert "| refund | FAIL | 10 | 9 | 1 | 0 | 0 |" in text.splitlines()
    assert f"  crashcert run --scenario refund --fault {shards.BROKEN}" in text.splitlines()


def test_outside_github_the_merge_writes_neither(tmp_path: pathlib.Path) -> None:
    result = invoke(tmp_path, {github.SUMMARY_VARIABLE: "", "GITHUB_ACTIONS": ""})
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("::") for line in result.output.splitlines())


def test_a_matrix_merge_names_every_scenario_and_annotates_its_failures(
    tmp_path: pathlib.Path,
) -> None:
    directories = [str(path) for path in matrix_shards._write_shards(tmp_path, 2)]
    path = tmp_path / "step-summary.md"
    env = {github.SUMMARY_VARIABLE: str(path), "GITHUB_ACTIONS": "true"}
    arguments = [*directories, "--out", str(tmp_path / "merged")]
    result = click.testing.CliRunner().invoke(merge.merge, arguments, env=env)
    assert result.exit_code == 1, result.output  # kill@tool.started#7 FAILed
    lines = result.output.splitlines()
    [row] = [i for i, line in enumerate(lines) if line.split() == ["FAIL", "refund", "F1", "P39"]]
    assert lines[row + 1].split() == ["FAIL", "at:", "kill@tool.started#7"]
    annotations = [line for line in lines if line.startswith("::")]
    assert annotations == [
        "::error title=crashcert refund kill@tool.started#7::crashcert run --scenario refund"
        "%0AFAIL x: s"
    ]
    assert "| refund | FAIL | 40 | 39 | 1 | 0 | 0 |" in path.read_text().splitlines()
