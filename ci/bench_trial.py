"""Where one kill trial's wall time goes, phase by phase: the median over a few trials run
one at a time (no other trial competing), from the trial's own records (boundary hits,
the kill, the successor's claim) and from timers wrapped around the harness's steps.
Prints figures; asserts nothing.

    .venv/bin/python ci/bench_trial.py [--scenario refund] [--fault kill@tool.returned#1] [-n 9]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import pathlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from harness.engines import commands
from harness.lab import database_links, launcher, shared
from harness.scenario import schema
from harness.trial import artifacts, control, runner
from harness.world import world

_spent: dict[str, list[float]] = collections.defaultdict(list)
_local = threading.local()


def _timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            _current()[label] += time.monotonic() - started

    return wrapper


def _current() -> collections.Counter[str]:
    return _local.__dict__.setdefault("spent", collections.Counter())


@contextlib.contextmanager
def _wrapped(targets: list[tuple[Any, str, str]]) -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    for owner, name, label in targets:
        setattr(owner, name, _timed(label, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _phases(outcome: runner.TrialOutcome) -> dict[str, float]:
    trial = outcome.history
    hits = trial.boundary_hits()
    kills = [f for f in trial.faults() if f.action == "kill"]
    first = hits[0].t if hits else trial.ended_at
    out = {
        "start to workers started": (trial.workers_started_at or first) - trial.started_at,
        "workers started to first boundary": first - (trial.workers_started_at or first),
    }
    if kills:
        kill = kills[0]
        claims = [h for h in hits if h.point == "run.claimed" and h.t > kill.t]
        out["first boundary to kill"] = kill.t - first
        claim = claims[0].t if claims else kill.t
        out["kill to successor's claim"] = claim - kill.t
        out["claim to run seen terminal"] = (trial.finished_at or claim) - claim
    else:
        out["first boundary to run seen terminal"] = (trial.finished_at or first) - first
    out["terminal to trial end"] = trial.ended_at - (trial.finished_at or trial.ended_at)
    out["whole trial"] = trial.ended_at - trial.started_at
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="refund")
    parser.add_argument("--fault", action="append", default=None)
    parser.add_argument("-n", type=int, default=9)
    args = parser.parse_args()
    faults = args.fault or ["kill@tool.returned#1"]
    engine = commands.find("reference")
    scenario = schema.find(args.scenario)
    targets = [
        (shared.Lab, "clone_database", "clone (spare taken)"),
        (shared.Lab, "drop_database", "drop (queued)"),
        (world.World, "start", "world start"),
        (world.World, "stop", "world stop"),
        (control.ControlServer, "stop", "control stop"),
        (launcher.Launcher, "close", "workers stopped and reaped"),
        (database_links.DatabaseLinks, "dsn_for", "proxy create"),
        (database_links.DatabaseLinks, "close", "proxy audit and delete"),
        (type(engine), "submit", "submit"),
        (type(engine), "report", "report"),
        (type(engine), "export", "export"),
        (runner.judge, "judge", "checks"),
        (artifacts, "write_trial", "trial directory"),
    ]
    rows: list[dict[str, float]] = []
    with shared.open_lab(engine) as lab, tempfile.TemporaryDirectory() as out:
        spec = runner.TrialSpec.under(scenario, faults)
        runner.run_trial(lab, spec, out_dir=pathlib.Path(out))  # warm-up
        with _wrapped(targets):
            for _ in range(args.n):
                _current().clear()
                outcome = runner.run_trial(lab, spec, out_dir=pathlib.Path(out))
                row = _phases(outcome)
                row.update({f"  {k}": v for k, v in _current().items()})
                rows.append(row)
                print(f"{outcome.verdict.value} {row['whole trial']:.3f} s", flush=True)
    print(f"{args.scenario} under {' '.join(faults)}: median of {len(rows)} trials, ms")
    for key in rows[0]:
        values = [r.get(key, 0.0) for r in rows]
        print(f"  {key:38} {1000 * statistics.median(values):7.1f}")


if __name__ == "__main__":
    main()
