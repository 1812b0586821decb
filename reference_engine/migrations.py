"""Applies the numbered migrations under sql/migrations (and sql/next for the next
release) that this database has not seen."""

from __future__ import annotations

from reference_engine import connection, sqlfile

_LOCK = 0x63726173  # "cras": serialises concurrent `migrate` commands


def migrate(db: connection.Connector, *, release: str = "current") -> list[str]:
    """Apply what `release` has and this database has not seen, all in one transaction; the
    names of those applied."""
    applied: list[str] = []
    with db.transaction() as tx:
        tx.all("lock_migrations", lock=_LOCK)
        tx.all("create_migrations_table")
        done = {row["number"] for row in tx.all("applied_migrations")}
        for migration in sqlfile.migrations(release=release):
            if migration.number in done:
                continue
            tx.script(migration.sql)
            tx.all("record_migration", number=migration.number, name=migration.name)
            applied.append(f"{migration.number:03d}_{migration.name}")
    return applied
