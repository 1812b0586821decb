"""Trial databases cloned ahead and dropped behind (harness/lab/postgres/spares.py), on a
real Postgres: a taken database is the template's copy under the trial's name, spares are
replaced, handed-back databases and unused spares are gone after close, and nothing is
lost when Postgres goes away for a while."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from harness.lab import gate as gate_module
from harness.lab import postgres, processes
from harness.lab.postgres import spares as spares_module
from harness.lab.postgres import templates

pytestmark = pytest.mark.postgres


def _databases(server: postgres.Server, prefix: str) -> set[str]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",)
        ).fetchall()
    return {row[0] for row in rows}


def _wait(condition: object) -> bool:
    """The background thread signals nobody: poll the catalog (processes.wait_until)."""
    return processes.wait_until(condition, timeout=30)


@pytest.fixture
def marked_template(pg_server: postgres.Server) -> Iterator[str]:
    name = f"cc_tpl_spares_{uuid.uuid4().hex[:8]}"

    def migrate(dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE marker (v text)")
            conn.execute("INSERT INTO marker VALUES ('from the template')")

    templates.ensure_template(pg_server, name, migrate)
    yield name
    templates.drop_template(pg_server, name)


@contextlib.contextmanager
def _unguarded() -> Iterator[None]:
    yield


def test_a_taken_database_is_a_copy_of_the_template_and_spares_are_replaced(
    pg_server: postgres.Server, marked_template: str
) -> None:
    spares = spares_module.Spares(pg_server, marked_template, size=2, hold=_unguarded)
    try:
        assert _wait(lambda: len(_databases(pg_server, spares_module.SPARE_PREFIX)) >= 2)
        name = f"cc_trial_spares_{uuid.uuid4().hex[:8]}"
        dsn = spares.take(name)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT v FROM marker").fetchone() == ("from the template",)
            assert conn.execute("SELECT current_database()").fetchone() == (name,)
        # the spare it was made from is gone, and a new one is made
        assert _wait(lambda: len(_databases(pg_server, spares_module.SPARE_PREFIX)) == 2)
        spares.drop_later(name)
        assert _wait(lambda: name not in _databases(pg_server, name))
    finally:
        spares.close()
    assert not _databases(pg_server, spares_module.SPARE_PREFIX)


def test_with_no_spare_ready_the_caller_clones_itself_and_close_drops_what_is_pending(
    pg_server: postgres.Server, marked_template: str
) -> None:
    gate = gate_module.SharedExclusive()
    with gate.hold(exclusive=True):  # a Postgres restart trial: the background must wait
        spares = spares_module.Spares(
            pg_server, marked_template, size=2, hold=lambda: gate.hold(exclusive=False)
        )
        name = f"cc_trial_spares_{uuid.uuid4().hex[:8]}"
        dsn = spares.take(name)  # must not wait for the background thread
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM marker").fetchone() == (1,)
        spares.drop_later(name)
        assert name in _databases(pg_server, name)  # not while the gate is held
    spares.close()
    assert name not in _databases(pg_server, name)
    assert not _databases(pg_server, spares_module.SPARE_PREFIX)


def test_spares_are_made_again_after_postgres_was_away(
    restartable_pg: postgres.Server, marked_template: str
) -> None:
    spares = spares_module.Spares(restartable_pg, marked_template, size=1, hold=_unguarded)
    try:
        assert _wait(lambda: len(_databases(restartable_pg, spares_module.SPARE_PREFIX)) == 1)
        restartable_pg.stop_immediate()
        name = f"cc_trial_spares_{uuid.uuid4().hex[:8]}"
        with pytest.raises(psycopg.OperationalError):
            spares.take(name)  # the rename and the clone both need the server
        restartable_pg.start()
        assert _wait(lambda: len(_databases(restartable_pg, spares_module.SPARE_PREFIX)) >= 1)
        dsn = spares.take(name)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM marker").fetchone() == (1,)
        spares.drop_later(name)
    finally:
        spares.close()
    assert name not in _databases(restartable_pg, name)
    assert not _databases(restartable_pg, spares_module.SPARE_PREFIX)
