"""The command line at its edges: user text printed as text, harness faults as one line
with exit 3, output directories that never collide, and analyze that survives a bad file."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import uuid

import click.testing
import pytest

from harness.checkers import verdict as verdict_module
from harness.cli import main, options
from harness.engines import adapter, commands
from harness.lab import postgres
from harness.lab.postgres import admin
from harness.lab.postgres import dsn as pg_dsn
from harness.trial import artifacts
from tests.checkers import builders

CRASHCERT = str(pathlib.Path(sys.executable).parent / "crashcert")
MARKUP = "ops[/]lead[bold]x"  # as a directory name: '/' splits it, which is fine


def _crashcert(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CRASHCERT, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_markup_in_user_text_is_printed_as_it_is(tmp_path: pathlib.Path) -> None:
    scenario = tmp_path / MARKUP / "s.yaml"  # a path is user text too
    scenario.parent.mkdir(parents=True)
    scenario.write_text("name: 'Not A Name'\n")
    done = _crashcert("scenarios", "validate", str(scenario), cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == verdict_module.Verdict.ERROR.exit_code  # bad input
    assert "invalid" in done.stdout and MARKUP in done.stdout  # not eaten as markup
    assert "^[a-z0-9_-]{1,64}$" in done.stdout  # the pattern as written, brackets included


def test_an_unwritable_out_fails_at_once_with_one_line(tmp_path: pathlib.Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    done = _crashcert("run", "--scenario", "refund", "--out", "file/trials", cwd=tmp_path)
    assert done.returncode == verdict_module.Verdict.ERROR.exit_code
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    # The input at fault, not an internal error (issue 33).
    assert line == f"crashcert: --out {tmp_path / 'file/trials'}: {blocked} is not a directory"
    assert "lab" not in done.stdout  # nothing started: the error came before any trial


def test_out_directories_of_the_same_second_never_collide(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(options.time, "strftime", lambda _format: "20261201-120000")
    first = options.new_out_dir(str(tmp_path))
    second = options.new_out_dir(str(tmp_path))
    assert first != second and first.is_dir() and second.is_dir()
    assert second.name == "20261201-120000-2"


def test_relative_paths_become_absolute_against_the_users_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert options.new_out_dir("out").parent == tmp_path / "out"
    assert options.engine_ref("engines/e.yaml") == str(tmp_path / "engines" / "e.yaml")
    assert options.engine_ref("reference") == "reference"
    assert options.scenario_ref("mine.yaml") == str(tmp_path / "mine.yaml")
    assert options.scenario_ref("refund") == "refund"  # a bundled name stays a name


def test_analyze_reports_a_corrupt_history_and_judges_the_rest(tmp_path: pathlib.Path) -> None:
    good = tmp_path / "refund" / "good"
    artifacts.write_trial(
        good, builders.clean(), verdicts=[], verdict="PASS", repro="crashcert run"
    )
    bad = tmp_path / "refund" / "bad"
    bad.mkdir(parents=True)
    (bad / "history.jsonl").write_text('{"type": "header"\n')

    result = click.testing.CliRunner().invoke(main.main, ["analyze", str(tmp_path)])

    assert result.exit_code == verdict_module.Verdict.ERROR.exit_code
    assert f"{bad}" in result.output and "unreadable" in result.output
    assert f"{good}" in result.output
    assert "reply.single_delivery: " in result.output  # the good trial was judged


@pytest.mark.parametrize("option", [["--runs", "0"], ["--storm-s", "-5"]])
def test_a_soak_that_tests_nothing_is_refused_before_anything_starts(
    tmp_path: pathlib.Path, option: list[str]
) -> None:
    done = _crashcert("soak", *option, cwd=tmp_path)
    assert done.returncode == verdict_module.Verdict.ERROR.exit_code
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("crashcert: soak: ")
    assert "soak seed=" not in done.stdout  # refused before a cluster was started


def test_an_unparsable_dsn_is_one_line_without_its_password(tmp_path: pathlib.Path) -> None:
    done = _crashcert(
        "run", "--scenario", "refund", "--pg-dsn", "postgresql://ops:hunter2@[bad", cwd=tmp_path
    )
    assert done.returncode == verdict_module.Verdict.ERROR.exit_code
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr + done.stdout
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("crashcert: --pg-dsn: not a libpq connection string")


@pytest.mark.postgres
def test_a_role_without_createdb_is_a_clear_error(
    tmp_path: pathlib.Path, pg_server: postgres.Server
) -> None:
    role = f"nocreatedb_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    with admin.connect(pg_server.dsn) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    try:
        dsn = pg_dsn.make(
            host=pg_server.host,
            port=pg_server.port,
            dbname="postgres",
            user=role,
            password=password,
        )
        done = _crashcert("run", "--scenario", "refund", "--pg-dsn", dsn, cwd=tmp_path)
    finally:
        with admin.connect(pg_server.dsn) as conn:
            conn.execute(f"DROP ROLE {role}")
    assert done.returncode == verdict_module.Verdict.ERROR.exit_code, done.stderr
    assert "Traceback" not in done.stderr and password not in done.stderr + done.stdout
    assert "CREATEDB" in done.stderr or "permission denied" in done.stderr


def test_engine_processes_inherit_none_of_the_harness_own_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRASHCERT_PG_DSN", "postgresql://ops:hunter2@db/postgres")
    monkeypatch.setenv("DATABASE_URL", "postgresql://someone-else")
    monkeypatch.setenv("KEEP_ME", "1")
    engine = commands.find("reference")
    env = engine._env("postgresql://trial")
    assert "CRASHCERT_PG_DSN" not in env and env["DATABASE_URL"] == "postgresql://trial"
    assert env["KEEP_ME"] == "1"
    inherited = adapter.inherited_environment()
    assert not any(name.startswith("CRASHCERT_") for name in inherited)
