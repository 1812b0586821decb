"""Benchmark the reference engine: 4 workers against the zero-latency world, then pgbench
on the same cluster in the same run. Prints figures; asserts nothing.

    python ci/bench_engine.py [--runs 200] [--workers 4] [--scenario refund]

A "transition" is one committed state-changing transaction of the engine: a claim, a
frontier save, a tool start, a tool settlement, a delivery start, a terminal status.
The pgbench baseline is a single-row UPDATE with 4 clients (`pgbench -n -c 4 -T 10`).

What the ratio is made of, in the same run: the CPU of one pgbench transaction (Postgres
and pgbench), the ceiling the engine's own Postgres CPU per transition puts on the ratio
however cheap its workers were, and one transition in each shape it could take
(ci/bench_shapes.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import psutil
import psycopg

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ci import bench_shapes  # noqa: E402
from harness.lab import postgres  # noqa: E402
from harness.lab.postgres import admin  # noqa: E402
from harness.scenario import schema  # noqa: E402
from harness.world import world as world_module  # noqa: E402
from reference_engine import commands, connection, inputs, migrations  # noqa: E402

TRANSITION_EVENTS = (
    "run.claimed",
    "checkpoint.saved",
    "tool.started",
    "tool.succeeded",
    "tool.failed",
    "tool.outcome_unknown",
    "reply.sending",
    "run.succeeded",
    "run.failed",
    "run.budget_exhausted",
    "run.delivery_uncertain",
)
PGBENCH_SCRIPT = "UPDATE bench_counter SET n = n + 1 WHERE id = 1;\n"


def make_input(world: world_module.World) -> inputs.RunInput:
    scenario = world.scenario
    run_key = f"bench-{uuid.uuid4().hex[:12]}"
    marker = world.register_run(run_key)
    user = schema.substitute_run_key(scenario.input.user, run_key)
    return inputs.RunInput(
        run_key=run_key,
        messages=[
            {"role": "system", "content": scenario.input.system},
            {"role": "user", "content": f"{marker} {user}"},
        ],
        budgets=inputs.Budgets(**scenario.budgets.model_dump()),
        max_attempts=5,
    )


def bench_engine(
    dsn: str, *, runs: int, workers: int, scenario_name: str, server_pid: int | None
) -> dict[str, float]:
    scenario = schema.find(scenario_name)
    with world_module.World(scenario) as world:
        db = connection.Connector(dsn)
        migrations.migrate(db)
        env = {key: value for key, value in os.environ.items() if not key.startswith("CRASHCERT_")}
        env.update(
            world.env(),
            DATABASE_URL=dsn,
            CRASHCERT_LEASE_MS="5000",
            CRASHCERT_POLL_MS="10",
            PYTHONPATH=str(REPO),
        )
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "reference_engine", "worker"],
                env={**env, "CRASHCERT_WORKER_ID": f"bench-{i}"},
                cwd=REPO,
                start_new_session=True,
            )
            for i in range(workers)
        ]
        try:
            # Warm and idle first: the figures are the engine's, not Python's start-up.
            _wait_connected(dsn, workers)
            cpu_before = _cpu(processes, server_pid)
            with psycopg.connect(dsn) as conn:
                commits_before = _xact_commits(conn)
            started = time.monotonic()
            for _ in range(runs):
                commands.create_run(db, make_input(world))
            elapsed = _wait_all_terminal(dsn, runs, started)
            cpu = {k: v - cpu_before[k] for k, v in _cpu(processes, server_pid).items()}
        finally:
            for process in processes:
                os.killpg(process.pid, signal.SIGTERM)
            for process in processes:
                process.wait(timeout=30)
        with psycopg.connect(dsn) as conn:
            commits = _xact_commits(conn) - commits_before
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE kind = ANY(%s) AND NOT (kind = 'checkpoint.saved'"
                " AND (data->>'version')::int = 1)) FROM events",
                (list(TRANSITION_EVENTS),),
            ).fetchone()
            statuses: dict[str, int] = dict(
                conn.execute("SELECT status, count(*) FROM runs GROUP BY 1").fetchall()
            )
        db.close()
    transitions = int(row[0]) if row else 0
    return {
        "runs": runs,
        "workers": workers,
        "elapsed_s": elapsed,
        "runs_per_s": runs / elapsed,
        "transitions": transitions,
        "transitions_per_s": transitions / elapsed,
        "xact_commits_per_s": commits / elapsed,
        "statuses": statuses,  # type: ignore[dict-item]
        **{f"cpu_ms_per_transition_{k}": 1000 * v / max(transitions, 1) for k, v in cpu.items()},
    }


def _cpu(processes: list[subprocess.Popen[bytes]], server_pid: int | None) -> dict[str, float]:
    """CPU seconds so far: the workers, Postgres (postmaster and backends), this process
    (the world answers in its threads)."""

    def total(process: psutil.Process) -> float:
        try:
            t = process.cpu_times()
        except psutil.NoSuchProcess:  # a backend that ended between listing and reading
            return 0.0
        return float(t.user + t.system + t.children_user + t.children_system)

    out = {"workers": sum(total(psutil.Process(p.pid)) for p in processes)}
    if server_pid is not None:
        root = psutil.Process(server_pid)
        out["postgres"] = sum(total(p) for p in [root, *root.children(recursive=True)])
    out["world_and_bench"] = total(psutil.Process())
    return out


def _wait_connected(dsn: str, workers: int, timeout: float = 120.0) -> None:
    """Until every worker has a session open (imported, connected, polling)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(DISTINCT application_name) FROM pg_stat_activity "
                "WHERE application_name LIKE 'worker bench-%%'"
            ).fetchone()
            if row and row[0] >= workers:
                return
            time.sleep(0.05)
    raise RuntimeError("workers did not connect")


def _xact_commits(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    row = conn.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    conn.commit()
    return int(row[0]) if row else 0  # type: ignore[call-overload]


def _wait_all_terminal(dsn: str, runs: int, started: float) -> float:
    deadline = started + 600
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM runs WHERE status NOT IN ('pending', 'running', 'waiting')"
            ).fetchone()
            if row and row[0] >= runs:
                return time.monotonic() - started
            time.sleep(0.02)  # polling the finish line, bounded by the deadline
    raise SystemExit("benchmark runs did not finish within 600 s")


def bench_pgbench(
    dsn: str, *, clients: int, seconds: int, server_pid: int | None
) -> dict[str, float] | None:
    """TPS, and the CPU of one transaction: Postgres's and pgbench's own."""
    pgbench = shutil.which("pgbench") or _bindir_pgbench()
    if pgbench is None:
        return None
    with admin.connect(dsn) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_counter")
        conn.execute("CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute("INSERT INTO bench_counter VALUES (1, 0)")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(PGBENCH_SCRIPT)
    before = _cpu([], server_pid).get("postgres", 0.0), _children_cpu()
    try:
        done = subprocess.run(
            [pgbench, "-n", "-c", str(clients), "-T", str(seconds), "-f", script.name, dsn],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=False,
        )
    finally:
        os.unlink(script.name)
    postgres_cpu = _cpu([], server_pid).get("postgres", 0.0) - before[0]
    client_cpu = _children_cpu() - before[1]
    match = re.search(r"tps = ([0-9.]+)", done.stdout)
    transactions = re.search(r"number of transactions actually processed: ([0-9]+)", done.stdout)
    if not match or not transactions:
        print(f"pgbench failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    count = max(int(transactions.group(1)), 1)
    return {
        "tps": float(match.group(1)),
        "cpu_ms_per_txn_postgres": 1000 * postgres_cpu / count,
        "cpu_ms_per_txn_pgbench": 1000 * client_cpu / count,
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _bindir_pgbench() -> str | None:
    try:
        bindir = postgres.binaries.find_bindir()
    except Exception:
        return None
    candidate = bindir / "pgbench"
    return str(candidate) if candidate.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--scenario", default="refund")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--pg-dsn", default=None, help="existing server (else embedded)")
    parser.add_argument("--shape-transactions", type=int, default=3000)
    args = parser.parse_args()
    with postgres.provide(dsn=args.pg_dsn) as server:
        name = f"bench_engine_{uuid.uuid4().hex[:8]}"
        with admin.connect(server.dsn) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        dsn = server.database_dsn(name)
        try:
            pid = getattr(server, "postmaster_pid", lambda: None)()
            engine = bench_engine(
                dsn,
                runs=args.runs,
                workers=args.workers,
                scenario_name=args.scenario,
                server_pid=pid,
            )
            pgbench = bench_pgbench(dsn, clients=4, seconds=args.pgbench_seconds, server_pid=pid)
            shapes = bench_shapes.measure(dsn, args.shape_transactions)
        finally:
            with admin.connect(server.dsn) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    tps = pgbench["tps"] if pgbench else None
    figures = {
        **engine,
        "scenario": args.scenario,
        "pgbench_single_row_update_tps_4_clients": tps,
        "pgbench": pgbench,
        "transitions_per_pgbench_tps": (engine["transitions_per_s"] / tps) if tps else None,
        "shapes": {label: dataclasses.asdict(cost) for label, cost in shapes.items()},
    }
    print(
        f"engine: {args.runs} {args.scenario} runs, {args.workers} workers, "
        f"{engine['elapsed_s']:.2f} s"
    )
    print(f"  completed runs/s:        {engine['runs_per_s']:.1f}")
    print(
        f"  committed transitions/s: {engine['transitions_per_s']:.1f} "
        f"({engine['transitions']} transitions; {engine['xact_commits_per_s']:.1f} "
        "xact commits/s incl. reads)"
    )
    cpu = {k[len("cpu_ms_per_transition_") :]: v for k, v in engine.items() if "cpu_ms" in k}
    print(
        "  CPU per transition, ms: "
        + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
        + f"; total {sum(cpu.values()):.2f}"
    )
    if pgbench is None or tps is None:
        print("pgbench: not run")
    else:
        print(
            f"pgbench single-row UPDATE, 4 clients: {tps:.0f} TPS; CPU per transaction, ms: "
            f"postgres {pgbench['cpu_ms_per_txn_postgres']:.3f}, "
            f"pgbench {pgbench['cpu_ms_per_txn_pgbench']:.3f}"
        )
        print(f"ratio transitions/s : pgbench TPS = {engine['transitions_per_s'] / tps:.3f}")
        _print_ceiling(cpu.get("postgres"), tps)
    print("one transition in each shape (same database, one connection):")
    print("\n".join(f"  {line}" for line in bench_shapes.render(shapes)))
    print(json.dumps(figures, default=str))


def _print_ceiling(postgres_ms: float | None, tps: float) -> None:
    """However cheap the workers and the world, the engine's own Postgres CPU per transition
    caps its transitions/s on this machine's cores, and so the ratio."""
    if not postgres_ms:
        return
    cores = len(os.sched_getaffinity(0))
    most = cores * 1000 / postgres_ms
    print(
        f"ceiling with workers and world free: {cores} cores / {postgres_ms:.2f} ms of Postgres "
        f"CPU per transition = {most:.0f} transitions/s, ratio <= {most / tps:.3f}"
    )


if __name__ == "__main__":
    main()
