"""Benchmark of the crash matrix: trial count, wall time, median seconds per trial, and
where a trial's time goes. Prints figures; asserts nothing (shared machines are noisy).

    .venv/bin/python ci/bench_matrix.py [--scenario refund ...] [--jobs 2]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import tempfile
import time

from harness.campaigns import matrix
from harness.contract.engines import commands
from harness.lab import shared as lab_module
from harness.scenario import schema as scenario


def _phases(outcome: object) -> dict[str, float]:
    trial = outcome.history  # type: ignore[attr-defined]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--engine", default="reference")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    names = args.scenario or [s.name for s in scenario.load_all()]
    engine = commands.find(args.engine)
    started = time.monotonic()
    with lab_module.open_lab(engine) as lab:
        lab_ready = time.monotonic() - started
        with tempfile.TemporaryDirectory() as out:
            result = matrix.run_matrix(
                lab,
                [(name, scenario.find(name)) for name in names],
                out_dir=pathlib.Path(out),
                engine_ref=args.engine,
                jobs=args.jobs,
            )
    durations = [o.history.ended_at - o.history.started_at for o in result.outcomes]
    print(f"lab start (Postgres, Toxiproxy, template, fork server): {lab_ready:.2f} s")
    print(f"trials: {len(result.outcomes)}  verdict: {result.verdict.value}  jobs: {args.jobs}")
    print(f"matrix wall time: {result.wall_s:.1f} s")
    print(f"throughput: {len(result.outcomes) / result.wall_s:.2f} trials/s")
    print(
        f"median seconds per trial: {statistics.median(durations):.2f} "
        f"(p90 {sorted(durations)[int(0.9 * (len(durations) - 1))]:.2f})"
    )
    phases = [_phases(o) for o in result.outcomes]
    print("median seconds per phase:")
    for name in phases[0]:
        print(f"  {name:34} {statistics.median(p[name] for p in phases):.3f}")


if __name__ == "__main__":
    main()
