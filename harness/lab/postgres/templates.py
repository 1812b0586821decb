"""A migrated template database, cloned per trial (CREATE DATABASE ... TEMPLATE is fast).

Errors are classified by SQLSTATE (psycopg.errors classes), never by message text.
"""

from __future__ import annotations

import hashlib
import time
import typing

from psycopg import errors as pg_errors
from psycopg import sql

from harness import errors
from harness.lab.postgres import admin, server

# CREATE DATABASE ... TEMPLATE fails with 55006 while anyone is connected to the template
# (e.g. a migration's connection that is still closing); it is worth a short retry.
IN_USE_RETRY_S = 10
IN_USE_POLL_S = 0.05

Migrate = typing.Callable[[str], None]


def ensure_template(server_: server.Server, name: str, migrate: Migrate) -> None:
    """Create database `name`, run `migrate(its_dsn)`, mark it a template. Idempotent.

    An existing template of that name is kept as is: put a migration version or hash in the
    name when the schema changes. A half-made one (migration failed) is dropped and redone.
    Safe to call from several processes at once (an advisory lock serialises them).
    """
    with admin.connect(server_.dsn) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_lock_key(name),))
        try:
            row = conn.execute(
                "SELECT datistemplate FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
            if row is not None and row[0]:
                return
            if row is not None:
                _drop(conn, name)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            try:
                migrate(server_.database_dsn(name))
            except BaseException:
                _drop(conn, name)
                raise
            ident = sql.Identifier(name)
            conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(ident))
            # Connections the migration left open would block every clone.
            end_sessions(conn, name)
            conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE true").format(ident))
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(name),))


def end_sessions(conn: admin.Connection, name: str) -> None:
    """Terminate every session connected to database `name` but this one."""
    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    )


def clone(server_: server.Server, template: str, name: str) -> str:
    """CREATE DATABASE `name` TEMPLATE `template`; returns the new database's DSN."""
    statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
        sql.Identifier(name), sql.Identifier(template)
    )
    deadline = time.monotonic() + IN_USE_RETRY_S
    with admin.connect(server_.dsn) as conn:
        while True:
            try:
                conn.execute(statement)
                break
            except pg_errors.ObjectInUse as exc:
                if time.monotonic() >= deadline:
                    raise errors.CrashcertError(
                        f"cannot clone template {template!r}: still in use after "
                        f"{IN_USE_RETRY_S} s (SQLSTATE {exc.sqlstate})"
                    ) from exc
                time.sleep(IN_USE_POLL_S)
            except pg_errors.InvalidCatalogName as exc:
                raise errors.CrashcertError(
                    f"cannot clone template {template!r}: no such database"
                ) from exc
            except pg_errors.DuplicateDatabase as exc:
                raise errors.CrashcertError(f"database {name!r} already exists") from exc
    return server_.database_dsn(name)


def rename(kept: admin.Kept, old: str, new: str) -> None:
    """ALTER DATABASE `old` RENAME TO `new` (nobody may be connected) on a kept connection."""
    with kept.use() as conn:
        rename_on(conn, old, new)


def rename_on(conn: admin.Connection, old: str, new: str) -> None:
    """The rename on an admin connection the caller already holds."""
    statement = sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
        sql.Identifier(old), sql.Identifier(new)
    )
    try:
        conn.execute(statement)
    except pg_errors.DuplicateDatabase as exc:
        raise errors.CrashcertError(f"database {new!r} already exists") from exc


def drop(server_: server.Server, name: str) -> None:
    """DROP DATABASE IF EXISTS ... WITH (FORCE): open connections are terminated."""
    with admin.connect(server_.dsn) as conn:
        _drop(conn, name)


def drop_template(server_: server.Server, name: str) -> None:
    """Drop a template made by ensure_template (a template must be unmarked first)."""
    with admin.connect(server_.dsn) as conn:
        _drop(conn, name)


def exists(server_: server.Server, name: str) -> bool:
    with admin.connect(server_.dsn) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


def _drop(conn: admin.Connection, name: str) -> None:
    ident = sql.Identifier(name)
    try:
        conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false").format(ident))
    except pg_errors.InvalidCatalogName:
        return  # already gone
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def _lock_key(name: str) -> int:
    # A stable signed 64-bit key per template name for pg_advisory_lock(bigint).
    digest = hashlib.blake2b(f"crashcert-template:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
