"""The example agents' own tables (agent.sql): leased runs, model attempts and answers,
tool journal, outbox. Every function opens its own short connection: the frameworks run
tools concurrently (the SDK's asyncio tasks, Pydantic AI's and LangGraph's executor
threads), and a connection shared across threads would mix their transactions.
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.types.json

import crashcert_probe as probe

SQL_FILE = pathlib.Path(__file__).with_name("agent.sql")
LEASE_S = int(os.environ.get("CRASHCERT_LEASE_MS", "1000")) / 1000
# A paused worker's open transaction must not hold a run's rows much past its lease
# (harness/CONTRACT.md, decided questions).
OPTIONS = f"-c idle_in_transaction_session_timeout={int(LEASE_S * 2000)}"


@functools.cache
def sql(name: str) -> str:
    sections = re.split(r"^-- name: (\w+)\n", SQL_FILE.read_text(), flags=re.MULTILINE)
    return dict(zip(sections[1::2], sections[2::2], strict=True))[name].strip()


class LeaseLost(RuntimeError):
    """The run's lease passed to another worker: this one must not commit for it."""


# This worker's id (configure sets it): the owner every fenced commit checks.
OWNER = os.environ.get("CRASHCERT_WORKER_ID", "")


def configure(owner: str) -> None:
    """In the worker: its owner id, and the lease from its own environment. A worker forked
    from the warm server (the description's `preload`) inherits this module as the server
    imported it, with the server's environment: read at import, the lease was the default."""
    global OWNER, LEASE_S, OPTIONS
    OWNER = owner
    LEASE_S = int(os.environ.get("CRASHCERT_LEASE_MS", "1000")) / 1000
    OPTIONS = f"-c idle_in_transaction_session_timeout={int(LEASE_S * 2000)}"


def fence(db: psycopg.Connection[Any], run_key: str) -> None:
    """In a writing transaction: hold the run's lease row, or raise LeaseLost."""
    if db.execute(sql("fence"), {"run_key": run_key, "owner": OWNER}).fetchone() is None:
        raise LeaseLost(f"run {run_key}: lease lost by {OWNER}")


def connect(*, autocommit: bool = True) -> psycopg.Connection[Any]:
    return psycopg.connect(os.environ["DATABASE_URL"], autocommit=autocommit, options=OPTIONS)


def execute(name: str, **params: Any) -> list[tuple[Any, ...]]:
    with connect() as db:
        cursor = db.execute(sql(name), params or None)
        return cursor.fetchall() if cursor.description else []


@contextmanager
def committed(
    boundary: str | None, run_key: str, **detail: Any
) -> Iterator[psycopg.Connection[Any]]:
    """A transaction, fenced by the run's lease, whose COMMIT makes `boundary` durable:
    reported around the COMMIT (`:before_commit` first), nothing when `boundary` is None."""
    with connect(autocommit=False) as db:
        fence(db, run_key)
        yield db
        if boundary is None:
            db.commit()
        else:
            with probe.committing(boundary, run_key, **detail):
                db.commit()


def jsonb(value: Any) -> psycopg.types.json.Jsonb:
    return psycopg.types.json.Jsonb(value)


def migrate() -> None:
    with connect() as db:
        db.execute(sql("schema"))


def submit(run_key: str, run_input: dict[str, Any]) -> None:
    execute("submit", run_key=run_key, input=jsonb(run_input))


def claim(owner: str) -> tuple[str, dict[str, Any], int] | None:
    rows = execute("claim", owner=owner, lease_s=LEASE_S)
    return (rows[0][0], rows[0][1], rows[0][2]) if rows else None


def renew(run_key: str, owner: str) -> bool:
    return bool(execute("renew", run_key=run_key, owner=owner, lease_s=LEASE_S))


def save_report(run_key: str, owner: str, report: dict[str, Any]) -> None:
    execute("save_report", run_key=run_key, owner=owner, report=jsonb(report))


def model_attempts(run_key: str) -> int:
    rows = execute("model_attempts", run_key=run_key)
    return int(rows[0][0]) if rows else 0


def tool_calls(run_key: str) -> list[dict[str, Any]]:
    rows = execute("tool_calls", run_key=run_key)
    return [{"id": r[0], "name": r[1], "key": r[2], "state": r[3]} for r in rows]


def status(run_key: str) -> tuple[str, dict[str, Any] | None, int] | None:
    rows = execute("status", run_key=run_key)
    return (rows[0][0], rows[0][1], rows[0][2]) if rows else None
