"""PostgreSQL side of the contract engine: statements from engine.sql, leases, checkpoints.

Every write of a worker runs in `Store.step`: one transaction that first fences (renews the
lease only if this worker still holds it), then does its work; for the starred boundaries
of the contract it reports `B:before_commit`, sends nothing but COMMIT, and reports `B`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from . import world

SQL = {
    name: body.strip()
    for name, body in re.findall(
        r"^-- name: (\w+)\n(.*?)(?=^-- name: |\Z)",
        (pathlib.Path(__file__).with_name("engine.sql")).read_text(),
        re.S | re.M,
    )
}
# Lost connections: psycopg raises these when the server, the proxy or the link went away.
CONNECTION_LOST = (psycopg.OperationalError, psycopg.InterfaceError)
# Boundaries the contract stars: reported once more just before COMMIT.
STARRED = {
    "model.pending",
    "tools.pending",
    "tool.started",
    "tool.settled",
    "model.ready",
    "reply.ready",
    "reply.sending",
    "run.finished",
}


class Fenced(Exception):
    """This worker no longer holds the run's lease: it must not touch the run again."""


@dataclasses.dataclass(frozen=True)
class Lease:
    run_id: str
    owner: str
    epoch: int


@dataclasses.dataclass
class Step:
    """The open transaction of one step: the fenced run row, and what to report."""

    db: psycopg.Connection
    run: dict[str, Any]
    boundary: str | None
    detail: dict[str, Any]

    def execute(self, statement: str, /, **params: Any) -> list[dict[str, Any]]:
        params = {k: Jsonb(v) if isinstance(v, dict | list) else v for k, v in params.items()}
        cursor = self.db.execute(SQL[statement], {"run_id": self.run["id"], **params})
        return cursor.fetchall() if cursor.description else []

    def checkpoint(self, phase: str, **changes: Any) -> None:
        """Moves the frontier: a new phase, version + 1, and the run's other changes."""
        values = {
            "iterations": 0,
            "tokens": 0,
            "turns": 0,
            "messages": [],
            "reply": None,
            "delivery_state": None,
            "delivery_key": None,
            **changes,
        }
        row = self.execute("checkpoint", phase=phase, **values)[0]
        self.detail.update(frontier_version=row["version"], phase=row["phase"])


def lease_ms() -> int:
    return int(os.environ.get("CRASHCERT_LEASE_MS", "1000"))


def connect() -> psycopg.Connection:
    # A transaction left open (a worker stopped at a :before_commit report) is ended by the
    # server after one lease, so the run's row lock never outlives the lease.
    return psycopg.connect(
        os.environ["DATABASE_URL"],
        autocommit=True,
        row_factory=dict_row,
        connect_timeout=5,
        options=f"-c idle_in_transaction_session_timeout={lease_ms()}",
    )


class Store:
    def __init__(self) -> None:
        self.owner = (
            f"{os.environ.get('CRASHCERT_WORKER_ID', 'w')}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        )
        self._db: psycopg.Connection | None = None

    @property
    def db(self) -> psycopg.Connection:
        if self._db is None or self._db.closed:
            self._db = connect()
        return self._db

    def lost(self, error: psycopg.Error) -> bool:
        """Whether an error means the connection is gone (then `reset` and try again).

        The server also ends a session itself, e.g. a transaction left open past
        idle_in_transaction_session_timeout (25P03, an InternalError): the connection is broken.
        """
        db = self._db
        return isinstance(error, CONNECTION_LOST) or db is None or db.broken or db.closed

    def reset(self) -> None:
        """After a lost connection: drop it; the next statement opens a new one."""
        if self._db is not None:
            try:
                self._db.close()
            except psycopg.Error:
                pass
        self._db = None

    def claim(self) -> Lease | None:
        row = self.db.execute(
            SQL["claim"], {"owner": self.owner, "lease_ms": lease_ms()}
        ).fetchone()
        return None if row is None else Lease(row["id"], self.owner, row["epoch"])

    def fence(self, lease: Lease, db: psycopg.Connection | None = None) -> dict[str, Any]:
        """Renews the lease and returns the run, or raises Fenced."""
        params = {
            "run_id": lease.run_id,
            "owner": lease.owner,
            "epoch": lease.epoch,
            "lease_ms": lease_ms(),
        }
        row = (db or self.db).execute(SQL["fence"], params).fetchone()
        if row is None:
            raise Fenced(lease.run_id)
        return row

    def hold(self, lease: Lease) -> None:
        """Right before an effect in the world: a renewal answered within half a lease.

        A renewal whose answer came back late (a slow link) proves nothing about now: the
        lease may have lapsed and the run been adopted meanwhile. Renew again until one is
        answered in time (the epoch is unchanged, so nobody claimed the run) or Fenced.
        """
        while True:
            sent = time.monotonic()
            self.fence(lease)
            if time.monotonic() - sent < lease_ms() / 2000:
                return

    @contextmanager
    def kept(self, lease: Lease) -> Iterator[None]:
        """Keeps renewing the lease from a side thread while the worker waits on the world.

        Only between transactions (never while a step is open), on its own connection, opened
        only when a wait outlasts a third of the lease. Once fenced it stops renewing.
        """
        stop = threading.Event()

        def renew() -> None:
            db: psycopg.Connection | None = None
            try:
                while not stop.wait(lease_ms() / 3000):
                    db = db or connect()
                    self.fence(lease, db)
            except (psycopg.Error, Fenced):
                return
            finally:
                if db is not None:
                    db.close()

        thread = threading.Thread(target=renew, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def tool_calls(self, run_id: str, turn: int) -> list[dict[str, Any]]:
        return self.db.execute(
            SQL["tool_calls_of_turn"], {"run_id": run_id, "turn": turn}
        ).fetchall()

    @contextmanager
    def step(self, lease: Lease, boundary: str | None, **detail: Any) -> Iterator[Step]:
        db = self.db
        with db.transaction():
            step = Step(db, self.fence(lease, db), boundary, dict(detail))
            yield step
            if step.boundary in STARRED:
                # Nothing but COMMIT goes to the database after this report.
                world.report(f"{step.boundary}:before_commit", lease.run_id, detail)
        if step.boundary:
            world.report(step.boundary, lease.run_id, step.detail)


def migrate() -> None:
    with connect() as db:
        db.execute(SQL["schema"])


def submit(run_input: dict[str, Any]) -> str:
    budgets = run_input["budgets"]
    with connect() as db:
        db.execute(
            SQL["submit"],
            {
                "id": f"run-{uuid.uuid4().hex[:16]}",
                "run_key": run_input["run_key"],
                "max_attempts": run_input.get("max_attempts", 5),
                "messages": Jsonb(run_input["messages"]),
                "iterations": budgets["iterations"],
                "tool_calls": budgets["tool_calls"],
                "tokens": budgets["tokens"],
            },
        )
        # Submitting the same run key twice names the same run.
        return db.execute(SQL["run_by_key"], {"run_key": run_input["run_key"]}).fetchone()["id"]


def export(run_id: str) -> dict[str, Any]:
    """The engine's tables the harness may check its reports against (CONTRACT.md s. 4)."""
    with connect() as db:
        return {"checkpoints": db.execute(SQL["export_checkpoints"], {"run_id": run_id}).fetchall()}


def report(run_id: str) -> dict[str, Any]:
    with connect() as db:
        run = db.execute(SQL["report_run"], {"run_id": run_id}).fetchone()
        if run is None:
            raise SystemExit(f"no run {run_id}")
        models = db.execute(SQL["report_model_calls"], {"run_id": run_id}).fetchall()
        tools = db.execute(SQL["report_tool_calls"], {"run_id": run_id}).fetchall()
    return {
        "v": 1,
        "run_id": run_id,
        "status": run["status"],
        "reason": run["reason"],
        "attempts": run["attempts"],
        "frontier": {"phase": run["phase"], "version": run["version"]},
        "model_calls": models,
        "tool_calls": [
            {
                "id": t["call_id"],
                "name": t["name"],
                "key": t["key"],
                "state": t["state"],
                "turn": t["turn"],
            }
            for t in tools
        ],
        "budget": {
            name: {"used": run[f"{name}_used"], "limit": run[f"{name}_limit"]}
            for name in ("iterations", "tool_calls", "tokens")
        },
        "delivery": {"state": run["delivery_state"], "key": run["delivery_key"]},
    }
