"""What making a trial database ready costs Postgres: CPU (the server's process tree, from
/proc) and wall time of each way, on the reference engine's migrated template, in one run.

    .venv/bin/python ci/bench_trial_db.py [-n 15]

Ways measured: CREATE DATABASE ... TEMPLATE (WAL_LOG, Postgres 15's default, and
FILE_COPY), DROP DATABASE, renaming a spare, and the lab's reset in place of a used trial
database (harness/lab/postgres/recycle.py: sessions ended, renamed, every table a fresh
clone holds empty emptied as TRUNCATE would, by DELETE and VACUUM, the fingerprint compared).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import statistics
import sys
import time
import uuid
from collections.abc import Callable

import psutil

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from harness.engines import commands
from harness.lab import postgres
from harness.lab.postgres import admin, recycle, templates


def _server_cpu(postmaster: int) -> float:
    root = psutil.Process(postmaster)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _measure(postmaster: int, action: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = _server_cpu(postmaster), time.perf_counter()
    action()
    return time.perf_counter() - wall, _server_cpu(postmaster) - cpu


def _use(dsn: str) -> None:
    """A trial's worth of rows: a run submitted and some events appended."""
    with admin.connect(dsn) as conn:
        run = conn.execute(
            "INSERT INTO runs (run_key, input, budget_iterations, budget_tool_calls, "
            "budget_tokens, max_attempts) VALUES (%s, '{}', 5, 5, 1000, 3) RETURNING id",
            (uuid.uuid4().hex,),
        ).fetchone()
        assert run is not None
        for _ in range(40):
            conn.execute(
                "INSERT INTO events (run_id, kind) VALUES (%s, 'run.lease_extended')", (run[0],)
            )


def _reset(
    server: postgres.Server,
    admin_conn: admin.Kept,
    name: str,
    new_name: str,
    pristine: recycle.Pristine,
    clean: list[bool],
) -> None:
    clean.append(recycle.reset(server, admin_conn, name, new_name, pristine))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=15)
    args = parser.parse_args()
    engine = commands.find("reference")
    figures: dict[str, list[tuple[float, float]]] = {}

    def measure(label: str, postmaster: int, action: Callable[[], object]) -> None:
        figures.setdefault(label, []).append(_measure(postmaster, action))

    with postgres.provide() as pg:
        postmaster = int(pg.postmaster_pid())
        template = f"cc_tpl_bench_{uuid.uuid4().hex[:8]}"
        templates.ensure_template(pg, template, engine.migrate)
        first = f"bench_first_{uuid.uuid4().hex[:8]}"
        templates.clone(pg, template, first)
        pristine = recycle.Pristine.of(pg.database_dsn(first))
        templates.drop(pg, first)
        clean: list[bool] = []
        # the lab's spares keep an admin connection each for renames and resets (admin.Kept)
        for_takes, for_resets = admin.Kept(lambda: pg.dsn), admin.Kept(lambda: pg.dsn)
        try:
            for i in range(args.n):
                a, b, c = (f"bench_{k}_{i}" for k in "abc")
                with admin.connect(pg.dsn) as conn:
                    measure(
                        "clone (WAL_LOG)",
                        postmaster,
                        functools.partial(conn.execute, f"CREATE DATABASE {a} TEMPLATE {template}"),
                    )
                    measure(
                        "clone (FILE_COPY)",
                        postmaster,
                        functools.partial(
                            conn.execute,
                            f"CREATE DATABASE {b} TEMPLATE {template} STRATEGY FILE_COPY",
                        ),
                    )
                _use(pg.database_dsn(a))
                measure(
                    "reset in place (recycle.reset)",
                    postmaster,
                    functools.partial(_reset, pg, for_resets, a, c, pristine, clean),
                )
                measure(
                    "rename a spare",
                    postmaster,
                    functools.partial(templates.rename, for_takes, c, a),
                )
                _use(pg.database_dsn(a))
                measure("drop (used)", postmaster, functools.partial(templates.drop, pg, a))
                templates.drop(pg, b)
        finally:
            for_takes.close()
            for_resets.close()
            templates.drop_template(pg, template)
    print(f"trial database preparation, median of {args.n} (ms): wall / Postgres CPU")
    for label, values in figures.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"  {label:40} {1000 * wall:7.1f} / {1000 * cpu:6.1f}")
    print(f"  resets that left a fresh clone's fingerprint: {sum(clean)} of {len(clean)}")
    print(f"  tables a reset empties: {len(pristine.empty_tables)}")


if __name__ == "__main__":
    main()
