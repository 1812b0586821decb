"""Trial databases cloned ahead and dropped behind (harness/lab/postgres/spares.py), on a
real Postgres: a taken database is the template's copy under the trial's name, spares are
replaced, handed-back databases and unused spares are gone after close, and nothing is
lost when Postgres goes away for a while."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import psycopg.errors
import pytest
from psycopg import conninfo

from harness.lab import gate as gate_module
from harness.lab import postgres, processes
from harness.lab.postgres import admin, recycle, templates
from harness.lab.postgres import spares as spares_module

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


def _oid(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _spare_oids(server: postgres.Server) -> set[int]:
    return _oids(server, spares_module.SPARE_PREFIX)


def _oids(server: postgres.Server, prefix: str = "") -> set[int]:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT oid FROM pg_database WHERE datname LIKE %s", (prefix + "%",)
        ).fetchall()
    return {int(row[0]) for row in rows}


@pytest.fixture
def table_template(pg_server: postgres.Server) -> Iterator[str]:
    """A template with a table holding a row and an empty one with an identity column."""
    name = f"cc_tpl_recycle_{uuid.uuid4().hex[:8]}"

    def migrate(dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE marker (v text)")
            conn.execute("INSERT INTO marker VALUES ('from the template')")
            conn.execute("CREATE TABLE trail (id bigserial PRIMARY KEY, what text)")

    templates.ensure_template(pg_server, name, migrate)
    yield name
    templates.drop_template(pg_server, name)


def _used(pg_server: postgres.Server, spares: spares_module.Spares, change: str) -> tuple[str, int]:
    """A trial's database, changed by `change`; its name and oid."""
    name = f"cc_trial_recycle_{uuid.uuid4().hex[:8]}"
    dsn = spares.take(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO trail (what) VALUES ('a trial was here')")
        conn.execute(change)
    return name, _oid(dsn)


def test_a_given_back_database_is_reset_and_served_again_as_a_fresh_clone(
    pg_server: postgres.Server, table_template: str
) -> None:
    spares = spares_module.Spares(pg_server, table_template, size=1, hold=_unguarded)
    try:
        assert _wait(lambda: len(_databases(pg_server, spares_module.SPARE_PREFIX)) >= 1)
        name, oid = _used(pg_server, spares, "SELECT 1")
        lingering = psycopg.connect(pg_server.database_dsn(name), autocommit=True)
        spares.give_back(name)
        # reset in place (the same database, renamed), not dropped and cloned
        assert _wait(lambda: oid in _spare_oids(pg_server))
        assert name not in _databases(pg_server, name)
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")  # the trial's session was ended first
        lingering.close()
        taken = None
        for _ in range(3):  # the pool holds up to two spares: take until it is this one
            taken = spares.take(f"cc_trial_recycle_{uuid.uuid4().hex[:8]}")
            if _oid(taken) == oid:
                break
        assert taken is not None and _oid(taken) == oid
        with psycopg.connect(taken) as conn:
            assert conn.execute("SELECT v FROM marker").fetchall() == [("from the template",)]
            assert conn.execute("SELECT count(*) FROM trail").fetchone() == (0,)
            row = conn.execute("INSERT INTO trail (what) VALUES ('x') RETURNING id").fetchone()
            assert row == (1,)  # its sequence restarted too
    finally:
        spares.close()
    assert not _databases(pg_server, spares_module.SPARE_PREFIX)


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE extra (v int)",
        "UPDATE marker SET v = 'changed by the trial'",
        "ALTER TABLE trail ADD COLUMN note text",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE SEQUENCE loose",
    ],
)
def test_a_given_back_database_unlike_a_fresh_clone_after_its_reset_is_dropped(
    pg_server: postgres.Server, table_template: str, change: str
) -> None:
    spares = spares_module.Spares(pg_server, table_template, size=1, hold=_unguarded)
    try:
        assert _wait(lambda: len(_databases(pg_server, spares_module.SPARE_PREFIX)) >= 1)
        name, oid = _used(pg_server, spares, change)
        spares.give_back(name)
        # dropped under whichever name it had (reset in place keeps the oid)
        assert _wait(lambda: oid not in _oids(pg_server))
    finally:
        spares.close()
    assert not _databases(pg_server, spares_module.SPARE_PREFIX)


@pytest.fixture
def guarded_database(pg_server: postgres.Server) -> Iterator[str]:
    """A database whose tables refuse DELETE by trigger and reference each other (RESTRICT),
    as an engine's append-only tables may: TRUNCATE empties them all the same."""
    name = f"cc_recycle_guarded_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = pg_server.database_dsn(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE parent (id bigserial PRIMARY KEY)")
        conn.execute(
            "CREATE TABLE child (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            "parent bigint NOT NULL REFERENCES parent (id) ON DELETE RESTRICT, note text)"
        )
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'append-only'; END $$"
        )
        for table in ("parent", "child"):
            conn.execute(f"CREATE TRIGGER guard BEFORE DELETE ON {table} EXECUTE FUNCTION refuse()")
        for _ in range(50):  # a few pages, some of it TOASTed
            row = conn.execute("INSERT INTO parent DEFAULT VALUES RETURNING id").fetchone()
            assert row is not None
            conn.execute(
                "INSERT INTO child (parent, note) VALUES (%s, repeat(md5(random()::text), 300))",
                (row[0],),
            )
    yield dsn
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _emptied(dsn: str) -> list[tuple[str, int, int]]:
    """Each table's rows and heap bytes, then the ids a first insert into each gets."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        seen: list[tuple[str, int, int]] = []
        for table in ("parent", "child"):
            row = conn.execute(
                f"SELECT (SELECT count(*) FROM {table}), pg_relation_size('{table}')"
            ).fetchone()
            assert row is not None
            seen.append((table, int(row[0]), int(row[1])))
        first = conn.execute("INSERT INTO parent DEFAULT VALUES RETURNING id").fetchone()
        assert first is not None
        second = conn.execute("INSERT INTO child (parent) VALUES (%s) RETURNING id", first)
        row = second.fetchone()
        assert row is not None
    return [*seen, ("first ids", int(first[0]), int(row[0]))]


EMPTIED = [("parent", 0, 0), ("child", 0, 0), ("first ids", 1, 1)]


def test_a_reset_empties_as_truncate_would_past_triggers_and_foreign_keys(
    guarded_database: str,
) -> None:
    """No rows, heaps of 0 bytes (no dead rows left to grow trial after trial), and both the
    serial's and the identity column's sequences restarted."""
    with psycopg.connect(guarded_database, autocommit=True) as conn:
        recycle.empty(conn, ("child", "parent"))
    assert _emptied(guarded_database) == EMPTIED


def test_dead_rows_an_old_snapshot_keeps_make_the_reset_truncate_after_all(
    guarded_database: str,
) -> None:
    with psycopg.connect(guarded_database) as holder:  # a transaction open before the DELETE
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1").fetchone()
        with psycopg.connect(guarded_database, autocommit=True) as conn:
            recycle.empty(conn, ("child", "parent"))
        holder.rollback()
    assert _emptied(guarded_database) == EMPTIED


def test_a_role_that_is_no_superuser_resets_by_truncate(guarded_database: str) -> None:
    """The replica role that lets DELETE pass the guards is a superuser's: on a server of the
    user's, as its owner only, the reset truncates as before."""
    role, password = f"cc_owner_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(guarded_database, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        for table in ("parent", "child"):
            conn.execute(f"ALTER TABLE {table} OWNER TO {role}")
    try:
        owner = conninfo.make_conninfo(guarded_database, user=role, password=password)
        with psycopg.connect(owner, autocommit=True) as conn:
            recycle.empty(conn, ("child", "parent"))
        assert _emptied(guarded_database) == EMPTIED
    finally:
        with psycopg.connect(guarded_database, autocommit=True) as conn:
            conn.execute(f"REASSIGN OWNED BY {role} TO CURRENT_USER")
            conn.execute(f"DROP ROLE {role}")


def _backend(kept: admin.Kept) -> int:
    with kept.use() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def test_a_kept_admin_connection_is_reused_and_replaced_when_it_broke(
    pg_server: postgres.Server,
) -> None:
    dsn = pg_server.dsn
    kept = admin.Kept(lambda: dsn)
    try:
        first = _backend(kept)
        assert _backend(kept) == first  # one backend, not one per use
        with pytest.raises(psycopg.errors.DuplicateDatabase), kept.use() as conn:
            conn.execute('CREATE DATABASE "postgres"')
        assert _backend(kept) == first  # an error it survives keeps it
        with psycopg.connect(pg_server.dsn, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (first,))
        with pytest.raises(psycopg.OperationalError), kept.use() as conn:
            conn.execute("SELECT 1")  # it learns of the end by using it
        second = _backend(kept)
        assert second != first
        dsn = pg_server.database_dsn("template1")  # the server moved: connect anew
        assert _backend(kept) != second
    finally:
        kept.close()
