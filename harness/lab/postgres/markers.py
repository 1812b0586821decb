"""Proof that committed data survives a crash: write a marker, crash and restart, look for it."""

from __future__ import annotations

import uuid

import psycopg
from psycopg import errors as pg_errors

from harness import errors
from harness.lab.postgres import admin

TABLE = "crashcert_durability_marker"


def write_marker(dsn: str) -> str:
    """Commit a fresh token (COMMIT has returned: the server says it is durable)."""
    token = uuid.uuid4().hex
    try:
        with admin.connect(dsn) as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (token text PRIMARY KEY)")
            conn.execute(f"INSERT INTO {TABLE} (token) VALUES (%s)", (token,))
    except psycopg.OperationalError as exc:
        raise errors.EnvironmentProblem(f"cannot write the durability marker: {exc}") from exc
    return token


def marker_survived(dsn: str, token: str) -> bool:
    """True when the committed token is still there (False: committed data was lost)."""
    try:
        with admin.connect(dsn) as conn:
            row = conn.execute(f"SELECT 1 FROM {TABLE} WHERE token = %s", (token,)).fetchone()
    except pg_errors.UndefinedTable:
        return False
    except psycopg.OperationalError as exc:
        raise errors.EnvironmentProblem(f"cannot read the durability marker: {exc}") from exc
    return row is not None
