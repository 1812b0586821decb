"""Short-lived admin connections, and waiting until a server accepts them."""

from __future__ import annotations

import time

import psycopg

from harness import errors

CONNECT_TIMEOUT_S = 5
POLL_INTERVAL_S = 0.05

Connection = psycopg.Connection[tuple[object, ...]]


def connect(dsn: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Connection:
    """An autocommit connection (DDL such as CREATE DATABASE cannot run in a transaction)."""
    # libpq treats a connect_timeout below 2 s as 2 s.
    return psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, int(timeout_s)))


def accepts_connections(dsn: str, *, timeout_s: float = 2) -> bool:
    try:
        with connect(dsn, timeout_s=timeout_s) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def wait_until_accepting(dsn: str, *, timeout_s: float) -> None:
    """Poll until a query succeeds (recovery after a crash can take a moment)."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with connect(dsn, timeout_s=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(POLL_INTERVAL_S)
    raise errors.EnvironmentProblem(
        f"PostgreSQL did not accept connections within {timeout_s:.0f} s: {last}"
    )
