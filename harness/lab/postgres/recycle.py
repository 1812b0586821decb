"""A used trial database made ready again in place, instead of dropped and cloned anew.

A clone of the template costs Postgres ~130 ms of CPU (Postgres 15 writes the whole copy to
its WAL) and its drop ~10 ms more; a reset much less (ci/bench_trial_db.py). The reset is as
isolating as a clone or it is not used: the database is first renamed (nobody still
connected, and nobody reaches it by the trial's name again), then the tables a fresh clone
holds empty are emptied with their sequences restarted, and the result must have the
fingerprint of a fresh clone (fingerprint.sql: every schema object, owner, grant, setting,
sequence state and every table's contents). Anything else, or any error, and the caller
drops it.

Emptied as TRUNCATE would (no row triggers, no foreign-key checks, owned sequences
restarted), but by DELETE and VACUUM: TRUNCATE gives every table, index and TOAST table a
new file, ~9 ms of Postgres CPU and ~30 ms of wall per reset on the reference engine's eight
tables, against under 1 ms and ~4 ms. The VACUUM must leave each heap empty (0 bytes, as
TRUNCATE does); a snapshot old enough to keep the dead rows, and TRUNCATE runs after all.
"""

from __future__ import annotations

import functools
import importlib.resources

import psycopg.errors
from psycopg import sql

from harness.lab.postgres import admin, server, templates


@functools.cache
def _query(name: str) -> str:
    return importlib.resources.files(__package__).joinpath(name).read_text()


class Pristine:
    """What a fresh clone looks like: its fingerprint, and its empty tables."""

    def __init__(self, fingerprint: str, empty_tables: tuple[str, ...]) -> None:
        self.fingerprint = fingerprint
        self.empty_tables = empty_tables

    @classmethod
    def of(cls, dsn: str) -> Pristine:
        """Read from a database nobody has used since it was cloned."""
        with admin.connect(dsn) as conn:
            tables = tuple(str(row[0]) for row in conn.execute(_query("empty_tables.sql")))
            return cls(fingerprint(conn), tables)


def fingerprint(conn: admin.Connection) -> str:
    row = conn.execute(_query("fingerprint.sql")).fetchone()
    assert row is not None
    return str(row[0])


def reset(
    server_: server.Server, kept: admin.Kept, name: str, new_name: str, pristine: Pristine
) -> bool:
    """Rename `name` to `new_name` once its sessions are ended (on the `kept` admin
    connection), and reset it in place. True when it now has the fingerprint of a fresh
    clone; False (or an error) when it must be dropped instead. A rename refused because
    someone is still connected raises."""
    with kept.use() as conn:
        templates.end_sessions(conn, name)
        # waits (up to 5 s) for the ended sessions to go; a newcomer makes it fail
        templates.rename_on(conn, name, new_name)
    with admin.connect(server_.database_dsn(new_name)) as conn:
        if pristine.empty_tables:
            empty(conn, pristine.empty_tables)
        return fingerprint(conn) == pristine.fingerprint


def empty(conn: admin.Connection, tables: tuple[str, ...]) -> None:
    """Every row of `tables` gone, their heaps 0 bytes, their owned sequences restarted."""
    listed = sql.SQL(", ").join(sql.SQL(t) for t in tables)  # regclass text: quoted already
    truncate = sql.SQL("TRUNCATE {} RESTART IDENTITY").format(listed)
    try:
        with conn.transaction():
            # as TRUNCATE: no row triggers (an engine's append-only guard), no FK checks
            conn.execute("SET LOCAL session_replication_role = replica")
            _delete(conn, tables)
    except psycopg.errors.InsufficientPrivilege:  # not a superuser (a server of the user's)
        conn.execute(truncate)
        return
    conn.execute(sql.SQL("VACUUM {}").format(listed))
    if conn.execute(_query("heap_left.sql"), {"tables": list(tables)}).fetchall():
        conn.execute(truncate)


def _delete(conn: admin.Connection, tables: tuple[str, ...]) -> None:
    for table in tables:
        conn.execute(sql.SQL("DELETE FROM {}").format(sql.SQL(table)))
    owned = conn.execute(_query("owned_sequences.sql"), {"tables": list(tables)})
    for sequence in [str(row[0]) for row in owned]:
        conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.SQL(sequence)))
