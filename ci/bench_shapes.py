"""What one transition costs in each shape it could take, on the engine's own schema: the
client's CPU (this thread) and its Postgres backend's CPU (/proc) per transaction. Prints
figures; asserts nothing.

    .venv/bin/python ci/bench_shapes.py [--n 3000]     (its own embedded Postgres)

ci/bench_engine.py runs it on its database in the same run as the engine and pgbench. The
shapes answer issue 27's engine levers: one statement per transition (a SQL function that
locks, writes and appends its events; BEGIN and COMMIT stay apart, since the harness kills
between the work and COMMIT at `:before_commit`), pipeline mode, and the foreign keys of the
append-only tables (the same events into a copy of the table without its FK).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.lab import postgres  # noqa: E402
from harness.lab.postgres import admin  # noqa: E402
from reference_engine import connection, migrations  # noqa: E402

EVENTS = '[{"kind": "checkpoint.saved", "data": {}}, {"kind": "model.call_started", "data": {}}]'
LOCK = "SELECT id, status, lease_epoch FROM runs WHERE id = %(run)s FOR UPDATE"
UPDATE = "UPDATE runs SET updated_at = clock_timestamp() WHERE id = %(run)s"
APPEND = (
    "INSERT INTO {table} (run_id, kind, data) SELECT %(run)s, e->>'kind', e->'data' "
    "FROM jsonb_array_elements(%(events)s::jsonb) e"
)
FUNCTION = """
CREATE FUNCTION pg_temp.transition(p_run uuid, p_events jsonb) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE epoch int;
BEGIN
    SELECT lease_epoch INTO epoch FROM runs WHERE id = p_run FOR UPDATE;
    UPDATE runs SET updated_at = clock_timestamp() WHERE id = p_run;
    INSERT INTO events (run_id, kind, data)
        SELECT p_run, e->>'kind', e->'data' FROM jsonb_array_elements(p_events) e;
    RETURN epoch;
END $$
"""


@dataclasses.dataclass(frozen=True)
class Cost:
    """Per transaction: wall, the client thread's CPU, the backend's CPU (None: not local)."""

    wall_ms: float
    client_cpu_ms: float
    backend_cpu_ms: float | None


def measure(dsn: str, n: int = 3000) -> dict[str, Cost]:
    """Each shape `n` times (after n/10 to warm the plan caches) on one connection to a
    migrated engine database; leaves one run row and its events behind."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        run = a_run(conn)
        conn.execute("CREATE TEMP TABLE events_no_fk (LIKE events INCLUDING ALL)")  # LIKE drops FKs
        conn.execute(FUNCTION)
        params = {"run": run, "events": EVENTS}
        shapes: dict[str, Callable[[], None]] = {
            "statements (the engine today)": lambda: _statements(conn, params, "events"),
            "pipelined": lambda: _pipelined(conn, params),
            "one function (BEGIN, SELECT f(), COMMIT)": lambda: _function(conn, params),
            "statements, events without their FK": lambda: _statements(
                conn, params, "events_no_fk"
            ),
        }
        backend = conn.info.backend_pid
        return {label: _cost(one, n, backend) for label, one in shapes.items()}


def a_run(conn: psycopg.Connection[Any]) -> Any:
    """The id of a new run row (pending, never claimed) for transitions to lock and update."""
    row = conn.execute(
        "INSERT INTO runs (run_key, input, budget_iterations, budget_tool_calls, budget_tokens, "
        "max_attempts) VALUES (%s, '{}', 1, 0, 1, 1) RETURNING id",
        (f"shapes-{uuid.uuid4().hex[:12]}",),
    ).fetchone()
    assert row is not None
    return row[0]


def transition(conn: psycopg.Connection[Any], run: Any) -> None:
    """One transition as the engine makes it: lock the run row, update it, append two
    events, commit (ci/bench_matrix.py's database floor)."""
    _statements(conn, {"run": run, "events": EVENTS}, "events")


def _statements(conn: psycopg.Connection[Any], params: dict[str, Any], table: str) -> None:
    with conn.transaction():
        conn.execute(LOCK, params).fetchone()
        conn.execute(UPDATE, params)
        conn.execute(APPEND.format(table=table), params)


def _pipelined(conn: psycopg.Connection[Any], params: dict[str, Any]) -> None:
    """BEGIN and the lock in one exchange (the engine needs the row before its writes), the
    writes in a second, COMMIT in a third."""
    with conn.pipeline() as pipeline, conn.transaction():
        conn.execute(LOCK, params).fetchone()
        conn.execute(UPDATE, params)
        conn.execute(APPEND.format(table="events"), params)
        pipeline.sync()


def _function(conn: psycopg.Connection[Any], params: dict[str, Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_temp.transition(%(run)s, %(events)s::jsonb)", params).fetchone()


def _cost(one: Callable[[], None], n: int, backend: int) -> Cost:
    for _ in range(max(n // 10, 10)):
        one()
    wall, client, server = time.monotonic(), time.thread_time(), _backend_cpu(backend)
    for _ in range(n):
        one()
    after = _backend_cpu(backend)
    return Cost(
        wall_ms=1000 * (time.monotonic() - wall) / n,
        client_cpu_ms=1000 * (time.thread_time() - client) / n,
        backend_cpu_ms=None if server is None or after is None else 1000 * (after - server) / n,
    )


def _backend_cpu(pid: int) -> float | None:
    """User plus system seconds of a local backend (clock ticks: 10 ms; n makes them fine)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # the server is on another machine, or in a container we cannot see
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def render(costs: dict[str, Cost]) -> list[str]:
    """Lines of a table, each shape with its ratio of total CPU to the engine's own shape."""
    base = next(iter(costs.values()))
    lines = [f"{'transition shape':44} {'wall ms':>8} {'client CPU':>10} {'backend CPU':>11}"]
    for label, cost in costs.items():
        backend = "?" if cost.backend_cpu_ms is None else f"{cost.backend_cpu_ms:.3f}"
        ratio = ""
        if cost.backend_cpu_ms is not None and base.backend_cpu_ms is not None:
            total = cost.client_cpu_ms + cost.backend_cpu_ms
            ratio = f"  CPU x{total / (base.client_cpu_ms + base.backend_cpu_ms):.2f}"
        lines.append(
            f"{label:44} {cost.wall_ms:8.3f} {cost.client_cpu_ms:10.3f} {backend:>11}{ratio}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=3000, help="transactions per shape")
    args = parser.parse_args()
    with postgres.provide() as server:
        name = f"bench_shapes_{uuid.uuid4().hex[:8]}"
        with admin.connect(server.dsn) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = server.database_dsn(name)
        try:
            db = connection.Connector(dsn)
            migrations.migrate(db)
            db.close()
            costs = measure(dsn, args.n)
        finally:
            with admin.connect(server.dsn) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print("\n".join(render(costs)))


if __name__ == "__main__":
    main()
