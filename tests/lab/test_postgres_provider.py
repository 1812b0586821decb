"""Provisioning PostgreSQL: embedded and external servers, templates, crash and restart."""

from __future__ import annotations

import statistics
import threading
import time
import uuid

import psycopg
import pytest

from harness import errors
from harness.lab import postgres
from harness.lab.postgres import accounts, binaries, containers, external, markers, templates

pytestmark = pytest.mark.postgres


def _show(dsn: str, setting: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SHOW {setting}").fetchone()
    assert row is not None
    return str(row[0])


def test_binaries_are_found() -> None:
    bindir = binaries.find_bindir()
    assert (bindir / "pg_ctl").exists()


def test_root_runs_the_server_as_an_unprivileged_account() -> None:
    account = accounts.server_account()
    assert account is None or account.uid != 0


def test_embedded_server_is_durable_and_local(pg_server: postgres.Server) -> None:
    if isinstance(pg_server, external.ExternalServer):
        pytest.skip("settings are the external server's own")
    assert pg_server.host == "127.0.0.1"
    assert _show(pg_server.dsn, "fsync") == "on"
    assert _show(pg_server.dsn, "synchronous_commit") == "on"
    assert _show(pg_server.dsn, "full_page_writes") == "on"
    assert _show(pg_server.dsn, "max_connections") == "200"
    assert _show(pg_server.dsn, "listen_addresses") == "127.0.0.1"
    with psycopg.connect(pg_server.dsn) as conn:
        assert conn.info.user == "postgres"
        assert conn.info.dbname == "postgres"


def test_database_dsn_names_the_database(pg_server: postgres.Server) -> None:
    dsn = pg_server.database_dsn("some_db")
    assert postgres.dsn.database(dsn) == "some_db"
    assert postgres.dsn.address(dsn) == (pg_server.host, pg_server.port)


def test_external_provider_uses_the_given_dsn_and_refuses_restarts(
    pg_server: postgres.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRASHCERT_PG_DSN", pg_server.dsn)
    with postgres.provide() as server:
        assert isinstance(server, external.ExternalServer)
        assert server.is_running()
        assert server.port == pg_server.port
        with pytest.raises(errors.CrashcertError, match="not a cluster the harness owns"):
            server.stop_immediate()
        with pytest.raises(errors.CrashcertError, match="not a cluster the harness owns"):
            server.start()
    assert pg_server.is_running()


def test_external_provider_reports_an_unreachable_server() -> None:
    dead = postgres.dsn.make(
        host="127.0.0.1", port=postgres.embedded.free_port(), dbname="x", user="x"
    )
    with pytest.raises(errors.EnvironmentProblem, match="cannot reach"):
        with postgres.provide(dsn=dead):
            pass


def test_template_is_migrated_once_and_clones_are_isolated(pg_server: postgres.Server) -> None:
    name = f"crashcert_tpl_{uuid.uuid4().hex[:8]}"
    calls: list[str] = []

    def migrate(dsn: str) -> None:
        calls.append(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE item (id int PRIMARY KEY, note text)")
            conn.execute("INSERT INTO item VALUES (1, 'seed')")

    templates.ensure_template(pg_server, name, migrate)
    templates.ensure_template(pg_server, name, migrate)
    assert len(calls) == 1
    try:
        first = templates.clone(pg_server, name, f"{name}_a")
        second = templates.clone(pg_server, name, f"{name}_b")
        with psycopg.connect(first, autocommit=True) as conn:
            conn.execute("INSERT INTO item VALUES (2, 'only in a')")
        with psycopg.connect(second) as conn:
            row = conn.execute("SELECT count(*) FROM item").fetchone()
        assert row == (1,)
        with pytest.raises(errors.CrashcertError, match="already exists"):
            templates.clone(pg_server, name, f"{name}_a")
    finally:
        templates.drop(pg_server, f"{name}_a")
        templates.drop(pg_server, f"{name}_b")
        templates.drop_template(pg_server, name)
    assert not templates.exists(pg_server, name)


def test_failed_migration_leaves_no_template_and_is_retried(pg_server: postgres.Server) -> None:
    name = f"crashcert_tpl_{uuid.uuid4().hex[:8]}"

    def broken(dsn: str) -> None:
        raise RuntimeError("migration 3 failed")

    with pytest.raises(RuntimeError):
        templates.ensure_template(pg_server, name, broken)
    assert not templates.exists(pg_server, name)
    templates.ensure_template(pg_server, name, lambda dsn: None)
    assert templates.exists(pg_server, name)
    templates.drop_template(pg_server, name)


def test_clone_of_a_missing_template_is_a_clear_error(pg_server: postgres.Server) -> None:
    with pytest.raises(errors.CrashcertError, match="no such database"):
        templates.clone(pg_server, "crashcert_no_such_template", "crashcert_never")


def test_clone_waits_while_the_source_is_in_use(pg_server: postgres.Server) -> None:
    source = f"crashcert_src_{uuid.uuid4().hex[:8]}"
    target = f"{source}_copy"
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{source}"')
    holder = psycopg.connect(pg_server.database_dsn(source))
    # The holder lets go while clone is retrying on SQLSTATE 55006 (object_in_use).
    release = threading.Timer(0.3, holder.close)
    release.start()
    try:
        started = time.monotonic()
        dsn = templates.clone(pg_server, source, target)
        assert time.monotonic() - started >= 0.2
        assert postgres.dsn.database(dsn) == target
    finally:
        release.join()
        templates.drop(pg_server, target)
        templates.drop(pg_server, source)


def test_clone_timing(pg_server: postgres.Server, pg_empty_template: str) -> None:
    """Not asserted: printed for the record (run with -s to see it)."""
    durations = []
    for i in range(5):
        name = f"crashcert_timing_{uuid.uuid4().hex[:8]}_{i}"
        started = time.perf_counter()
        templates.clone(pg_server, pg_empty_template, name)
        durations.append(time.perf_counter() - started)
        templates.drop(pg_server, name)
    print(f"template clone: median {statistics.median(durations) * 1000:.1f} ms over 5")


def test_immediate_stop_and_start_keep_committed_data(
    restartable_pg: postgres.Server, fresh_database: str
) -> None:
    server = restartable_pg
    port = server.port
    token = markers.write_marker(fresh_database)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE pending (v int)")
    uncommitted = psycopg.connect(fresh_database)
    uncommitted.execute("INSERT INTO pending VALUES (1)")  # never committed

    server.stop_immediate()
    assert not server.is_running()
    with pytest.raises(psycopg.OperationalError):
        uncommitted.execute("SELECT 1")
    uncommitted.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(fresh_database, connect_timeout=2)

    server.start()
    assert server.is_running()
    assert server.port == port
    assert markers.marker_survived(fresh_database, token)
    assert not markers.marker_survived(fresh_database, "never-written")
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("SELECT count(*) FROM pending").fetchone() == (0,)


def test_stop_of_a_stopped_server_is_a_clear_error(restartable_pg: postgres.Server) -> None:
    restartable_pg.stop_immediate()
    with pytest.raises(errors.CrashcertError, match="not running"):
        restartable_pg.stop_immediate()
    restartable_pg.start()
    restartable_pg.start()  # already running: nothing to do
    assert restartable_pg.is_running()


def test_marker_survives_repeated_crashes(
    restartable_pg: postgres.Server, fresh_database: str
) -> None:
    tokens = []
    for _ in range(3):
        tokens.append(markers.write_marker(fresh_database))
        restartable_pg.stop_immediate()
        restartable_pg.start()
    assert all(markers.marker_survived(fresh_database, t) for t in tokens)


@pytest.mark.docker
def test_testcontainers_provider() -> None:
    if not containers.docker_engine_answers():
        pytest.skip(containers.NO_DOCKER)
    with postgres.provide(provider="testcontainers") as server:
        assert server.is_running()
        with pytest.raises(errors.CrashcertError):
            server.stop_immediate()


def test_testcontainers_provider_without_docker_is_an_environment_problem() -> None:
    if containers.docker_engine_answers():
        pytest.skip("a Docker engine answers here")
    with pytest.raises(errors.EnvironmentProblem, match="no Docker engine answers here"):
        with postgres.provide(provider="testcontainers"):
            pass
