"""Secrets of the Postgres layer: the embedded cluster's password, and DSNs fit to store.

Another local user must not reach the embedded cluster as its superuser (who can run
programs as the server account with COPY ... TO PROGRAM), and no password the harness holds
may end up in a trial directory, which anyone who can read the output may read.
"""

from __future__ import annotations

import json
import os
import pathlib
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from psycopg import conninfo

from harness.checkers import verdict as verdict_module
from harness.engines import commands
from harness.faults import spec as fault_spec
from harness.lab import postgres, shared
from harness.lab.postgres import binaries, embedded
from harness.lab.postgres import dsn as pg_dsn
from harness.record import history
from harness.scenario import schema
from harness.trial import artifacts, runner

OTHER_USER = "nobody"
PSQL_TIMEOUT_S = 30
SECRET = "s3cr3t-Pa55"


def _password(dsn: str) -> str | None:
    value = conninfo.conninfo_to_dict(dsn).get("password")
    return None if value is None else str(value)


def _embedded(server: postgres.Server) -> embedded.EmbeddedServer:
    if not isinstance(server, embedded.EmbeddedServer):
        pytest.skip("only the embedded cluster is ours to secure (CRASHCERT_PG_DSN is set)")
    return server


def _psql_as_other_user(
    server: postgres.Server, *, password: str | None
) -> subprocess.CompletedProcess[str]:
    """`SELECT 1` as superuser over TCP, run by another local account (needs root to switch)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("switching to another local user needs root and runuser")
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        pytest.skip(f"no local user {OTHER_USER!r}")
    psql = binaries.find_bindir() / "psql"
    # Only what psql needs: no PG* variable or password file of ours may help it.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGPASSFILE": os.devnull}
    if password is not None:
        env["PGPASSWORD"] = password
    command = [
        "runuser",
        "-u",
        OTHER_USER,
        "--",
        str(psql),
        "-X",
        "-w",
        "-A",
        "-t",
        "-h",
        server.host,
        "-p",
        str(server.port),
        "-U",
        postgres.server.SUPERUSER,
        "-d",
        postgres.server.ADMIN_DATABASE,
        "-c",
        "SELECT 1",
    ]
    return subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=PSQL_TIMEOUT_S,
        cwd="/",
        check=False,
    )


# -- the embedded cluster ----------------------------------------------------------------


@pytest.mark.postgres
def test_another_local_user_cannot_connect_without_the_password(
    pg_server: postgres.Server,
) -> None:
    server = _embedded(pg_server)
    refused = _psql_as_other_user(server, password=None)
    assert refused.returncode != 0, f"{OTHER_USER} connected as superuser: {refused.stdout}"
    password = _password(server.dsn)
    assert password, "the embedded cluster's DSN carries no password"
    allowed = _psql_as_other_user(server, password=password)
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "1"


@pytest.mark.postgres
def test_each_cluster_has_its_own_password_and_no_password_file_is_left(
    pg_server: postgres.Server, tmp_path: pathlib.Path
) -> None:
    server = _embedded(pg_server)
    password = _password(server.dsn)
    assert password and len(password) >= embedded.PASSWORD_BYTES
    assert _password(server.database_dsn("other")) == password
    assert not (server.root / embedded.PWFILE_NAME).exists()
    other = embedded.EmbeddedServer(bindir=tmp_path, account=None, root=tmp_path / "other")
    try:
        assert _password(other.dsn) != password  # a fresh secret per cluster
    finally:
        other.close()


# -- DSNs and command lines fit to store -------------------------------------------------


def test_redact_drops_the_password_and_keeps_the_rest() -> None:
    url = f"postgresql://app:{SECRET}@db.internal:5433/prod?sslmode=require"
    redacted = pg_dsn.redact(url)
    assert SECRET not in redacted
    assert conninfo.conninfo_to_dict(redacted) == {
        "user": "app",
        "host": "db.internal",
        "port": "5433",
        "dbname": "prod",
        "sslmode": "require",
    }
    keyed = pg_dsn.redact(f"host=h dbname=d password='{SECRET} x' sslpassword={SECRET}")
    assert SECRET not in keyed and conninfo.conninfo_to_dict(keyed) == {"host": "h", "dbname": "d"}
    assert pg_dsn.redact("host=h dbname=d") == "host=h dbname=d"  # nothing to hide: unchanged
    assert SECRET not in pg_dsn.redact(f"not a dsn password={SECRET}")


def test_redact_argv_covers_every_way_of_passing_a_dsn() -> None:
    argv = [
        "crashcert",
        "run",
        "--pg-dsn",
        f"postgresql://app:{SECRET}@h/db",
        f"--pg-dsn=host=h password={SECRET}",
        "--dsn",
        f"host=h password='{SECRET}'",
        f"--dsn=postgres://app:{SECRET}@h/db",
        f"--other=postgresql://app:{SECRET}@h/db",
        f"host=h PASSWORD = {SECRET}",
        f"PGPASSWORD={SECRET}",
        "--seed",
        "7",
        "--pg-dsn",
    ]
    redacted = pg_dsn.redact_argv(argv)
    assert not [arg for arg in redacted if SECRET in arg], redacted
    assert len(redacted) == len(argv)
    assert redacted[:2] == ["crashcert", "run"] and redacted[-3:] == ["--seed", "7", "--pg-dsn"]
    assert redacted[2] == "--pg-dsn" and "host=h" in redacted[3] and "user=app" in redacted[3]
    assert redacted[8] == "--other=postgresql://app@h/db"


def test_meta_json_command_line_has_no_password(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["crashcert", "run", "--pg-dsn", f"postgresql://app:{SECRET}@h/db", "--seed", "3"]
    monkeypatch.setattr(sys, "argv", argv)
    trial = history.TrialHistory(
        trial_id="t1",
        engine="reference",
        scenario=schema.parse(
            {"name": "tiny", "input": {"user": "hi"}, "turns": [{"content": "hello"}]}
        ),
        run_key="tiny-t1",
    )
    artifacts.write_trial(tmp_path, trial, verdicts=[], verdict="PASS", repro="crashcert run x")
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert SECRET not in json.dumps(meta)
    assert meta["command_line"][:3] == ["crashcert", "run", "--pg-dsn"]
    assert meta["command_line"][4:] == ["--seed", "3"]


# -- a real trial ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(pg_server: postgres.Server) -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference"), pg_dsn=pg_server.dsn) as opened:
        yield opened


@pytest.mark.postgres
def test_no_file_of_a_trial_holds_the_database_password(
    pg_server: postgres.Server,
    lab: shared.Lab,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The Lab reaches pg_server by its DSN (an external server to the Lab): ask pg_server.
    password = _password(lab.pg.dsn)
    if password is None and not isinstance(pg_server, embedded.EmbeddedServer):
        pytest.skip("the server from CRASHCERT_PG_DSN is reached without a password")
    assert password, "the embedded cluster's DSN carries no password"
    # As `crashcert run --pg-dsn DSN` would be started: the password is on the command line.
    monkeypatch.setattr(sys, "argv", ["crashcert", "run", "--pg-dsn", lab.pg.dsn])
    spec = runner.TrialSpec(
        scenario=schema.find("refund"),
        plan=[fault_spec.FaultStep(action="kill", point="tool.started", occurrence=2)],
        label="kill@tool.started#2",
    )
    outcome = runner.run_trial(lab, spec, out_dir=tmp_path)
    assert outcome.verdict is verdict_module.Verdict.PASS, outcome.failing
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"meta.json", "history.jsonl", "repro.txt", "verdicts.json"} <= names
    assert any(path.parent.name == "workers" for path in files)
    leaking = [str(path) for path in files if password.encode() in path.read_bytes()]
    assert leaking == []
