"""Benchmark of the crash matrix: trials/s, median and p90 seconds per trial, where a trial's
time goes, CPU per trial by part (Postgres, workers, harness, Toxiproxy, from /proc), the
harness's peak RSS, and the ratio to floors measured in the same run. Prints figures; asserts
nothing (shared machines are noisy).

    .venv/bin/python ci/bench_matrix.py [--scenario refund ...] [--jobs 2|auto]

The floor is what no fault trial can beat: the median baseline's clone of the template,
worker fork and the scenario's commits with no faults (start of the trial to the run seen
terminal), without its teardown and checks. The database floor is measured on a trial
database of the same lab: one round trip, and one transaction shaped like a transition (lock
the run row, update it, append two events, commit: ci/bench_shapes.py), wall time and
Postgres CPU each.
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import statistics
import sys
import tempfile
import time
from typing import Any

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from ci import bench_cpu, bench_shapes
from harness.campaigns import matrix
from harness.engines import commands
from harness.lab import shared
from harness.pool import autojobs
from harness.scenario import schema


def _phases(outcome: Any) -> dict[str, float]:
    trial = outcome.history
    hits = trial.boundary_hits()
    first_hit = hits[0].t if hits else trial.ended_at
    finished = trial.finished_at or trial.ended_at
    workers = trial.workers_started_at or trial.started_at
    return {
        "setup (clone, world, submit)": workers - trial.started_at,
        "worker start to first boundary": first_hit - workers,
        "run incl. recovery": finished - first_hit,
        "teardown, report, checks": trial.ended_at - finished,
    }


def _p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def _floor(outcomes: list[Any]) -> float:
    baselines = [o.history for o in outcomes if not o.spec.plan]
    return statistics.median((h.finished_at or h.ended_at) - h.started_at for h in baselines)


def _db_floor(lab: Any, parts: dict[str, int], n: int = 300) -> dict[str, tuple[float, float]]:
    """Wall and Postgres CPU seconds of a round trip and of a transition-shaped transaction."""
    name = f"cc_floor_{int(time.time() * 1000)}"
    dsn = lab.clone_database(name)  # a DSN
    out: dict[str, tuple[float, float]] = {}
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            run_id = bench_shapes.a_run(conn)
            shapes = {
                "round trip (SELECT 1)": lambda: conn.execute("SELECT 1").fetchone(),
                "transition-shaped transaction": lambda: bench_shapes.transition(conn, run_id),
            }
            for label, one in shapes.items():
                pg_before, wall = bench_cpu.sample(parts)["Postgres"], time.monotonic()
                for _ in range(n):
                    one()
                wall = time.monotonic() - wall
                out[label] = (wall / n, (bench_cpu.sample(parts)["Postgres"] - pg_before) / n)
    finally:
        lab.drop_database(name)
    return out


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--engine", default="reference")
    parser.add_argument("--jobs", default="2", help="a number, or auto (measured load)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the matrix this many times, holding every outcome as one long campaign "
        "would, and print the peak RSS after each round (flat in the number of trials?)",
    )
    parser.add_argument(
        "--keep-whole",
        action="store_true",
        help="keep passed trials' histories whole (as before matrix.kept), for comparison",
    )
    args = parser.parse_args()
    if args.keep_whole:
        matrix.kept = lambda outcome: outcome
    names = args.scenario or [s.name for s in schema.load_all()]
    engine = commands.find(args.engine)
    started = time.monotonic()
    with shared.open_lab(engine) as lab:
        lab_ready = time.monotonic() - started
        parts = bench_cpu.roots(lab)
        cpu_before = bench_cpu.sample(parts)
        held: list[Any] = []  # every round's outcomes, as one long campaign holds them
        with tempfile.TemporaryDirectory() as out:
            for round_ in range(args.rounds):
                result = matrix.run_matrix(
                    lab,
                    [(name, schema.find(name)) for name in names],
                    out_dir=pathlib.Path(out) / str(round_),
                    engine_ref=args.engine,
                    jobs=autojobs.parse(args.jobs),
                )
                held.extend(result.outcomes)
                if args.rounds > 1:
                    print(f"after {len(held)} trials: peak RSS {_peak_mib():.0f} MiB", flush=True)
        cpu = bench_cpu.delta(cpu_before, bench_cpu.sample(parts))
        db_floor = _db_floor(lab, parts)
    durations = [o.history.ended_at - o.history.started_at for o in result.outcomes]
    faulted = [o.history.ended_at - o.history.started_at for o in result.outcomes if o.spec.plan]
    floor = _floor(result.outcomes)
    peak_mib = _peak_mib()
    print(f"lab start (Postgres, Toxiproxy, template, fork server): {lab_ready:.2f} s")
    print(f"trials: {len(result.outcomes)}  verdict: {result.verdict.value}  jobs: {result.jobs}")
    print(f"matrix wall time: {result.wall_s:.1f} s")
    print(f"throughput: {len(result.outcomes) / result.wall_s:.2f} trials/s")
    print(
        f"seconds per trial: median {statistics.median(durations):.2f}, p90 {_p90(durations):.2f}"
    )
    if faulted:
        print(
            f"seconds per fault trial: median {statistics.median(faulted):.2f}, "
            f"p90 {_p90(faulted):.2f}"
        )
    print(
        f"floor (clone + worker fork + commits, no fault): {floor:.2f} s; "
        f"median trial / floor: {statistics.median(durations) / floor:.1f}"
    )
    print(f"peak RSS of the harness: {peak_mib:.0f} MiB")
    trials = len(held)
    print(f"CPU per trial, ms (over {trials} trials, from /proc):")
    for name, seconds in cpu.items():
        print(f"  {name:34} {1000 * seconds / trials:7.1f}")
    print(f"  {'total':34} {1000 * sum(cpu.values()) / trials:7.1f}")
    print("database floor (same lab, same run), ms wall / ms Postgres CPU:")
    for label, (wall, pg_cpu) in db_floor.items():
        print(f"  {label:34} {1000 * wall:7.2f} / {1000 * pg_cpu:5.2f}")
    phases = [_phases(o) for o in result.outcomes]
    print("median seconds per phase:")
    for name in phases[0]:
        print(f"  {name:34} {statistics.median(p[name] for p in phases):.3f}")


if __name__ == "__main__":
    main()
