"""Benchmark the embedded PostgreSQL: start time, crash-restart time, template clone time.

    python ci/bench_postgres.py [--starts 3] [--clones 20]

Prints medians. Figures depend on the disk (fsync is on) and the machine's load.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
import typing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from harness.lab.postgres import admin, embedded, templates

SCHEMA_TABLES = 20  # a migrated template about the size of an engine's schema


def _timed(action: typing.Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _migrate(dsn: str) -> None:
    with admin.connect(dsn) as conn:
        for i in range(SCHEMA_TABLES):
            conn.execute(
                f"CREATE TABLE t{i} (id bigserial PRIMARY KEY, run_id text NOT NULL, "
                f"payload jsonb, created_at timestamptz DEFAULT now())"
            )
            conn.execute(f"CREATE INDEX ON t{i} (run_id)")


def _clone_times(server: embedded.EmbeddedServer, template: str, count: int) -> list[float]:
    durations = []
    for i in range(count):
        name = f"bench_{template}_{i}"
        started = time.perf_counter()
        templates.clone(server, template, name)
        durations.append(time.perf_counter() - started)
        templates.drop(server, name)
    return durations


def _ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:7.1f} ms  "
        f"min {min(values) * 1000:7.1f}  max {max(values) * 1000:7.1f}  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--clones", type=int, default=20)
    args = parser.parse_args()

    starts: list[float] = []
    for _ in range(args.starts):
        started = time.perf_counter()
        fresh = embedded.create()
        starts.append(time.perf_counter() - started)
        fresh.close()
    print(f"embedded start (initdb + start):   {_ms(starts)}")

    server = embedded.create()
    try:
        restarts = []
        for _ in range(args.starts):
            server.stop_immediate()
            restarts.append(_timed(server.start))
        print(f"restart after stop -m immediate:   {_ms(restarts)}")

        templates.ensure_template(server, "bench_empty", lambda dsn: None)
        templates.ensure_template(server, "bench_schema", _migrate)
        # CREATE DATABASE uses PostgreSQL 15's default STRATEGY WAL_LOG; FILE_COPY measured
        # 4-6x slower here (it forces two checkpoints), so templates.clone keeps the default.
        empty = _clone_times(server, "bench_empty", args.clones)
        print(f"clone, empty template:             {_ms(empty)}")
        schema = _clone_times(server, "bench_schema", args.clones)
        print(f"clone, {SCHEMA_TABLES}-table template:          {_ms(schema)}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
