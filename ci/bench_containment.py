"""What worker containment (harness/lab/containment.py) costs a trial: trials with it and
without it (the launcher's containment switched off, as before it existed), alternated in
one run on one lab, so both sides see the same machine. Prints the median wall time of the
whole trial and of the workers' stop, and the harness's own CPU time per trial; then the
containment's own steps alone (open with the stale sweep, a worker's start, close).
Asserts nothing.

    .venv/bin/python ci/bench_containment.py [--scenario S] [--fault F] [-n 9]
    CRASHCERT_NO_FORKSERVER=1 .venv/bin/python ci/bench_containment.py   (exec'd workers)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from harness.engines import commands
from harness.lab import containment, launcher, processes, shared
from harness.scenario import schema
from harness.trial import runner

WITH, WITHOUT = "contained", "uncontained"


@contextlib.contextmanager
def _switched_off() -> Iterator[None]:
    original = launcher.Launcher.contain
    launcher.Launcher.contain = lambda self: None  # type: ignore[assignment,method-assign,return-value]
    try:
        yield
    finally:
        launcher.Launcher.contain = original  # type: ignore[method-assign]


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _trial(lab: shared.Lab, spec: runner.TrialSpec, out: pathlib.Path) -> dict[str, float]:
    stop: list[float] = []
    close = launcher.Launcher.close

    def timed_close(self: Any) -> None:
        started = time.monotonic()
        try:
            close(self)
        finally:
            stop.append(time.monotonic() - started)

    launcher.Launcher.close = timed_close  # type: ignore[method-assign]
    try:
        cpu = _cpu()
        outcome = runner.run_trial(lab, spec, out_dir=out)
        cpu = _cpu() - cpu
    finally:
        launcher.Launcher.close = close  # type: ignore[method-assign]
    trial = outcome.history
    assert outcome.verdict.value == "PASS", outcome.failing
    return {
        "whole trial": trial.ended_at - trial.started_at,
        "workers stopped (Launcher.close)": sum(stop),
        "harness CPU": cpu,
    }


def _steps(directory: pathlib.Path, n: int) -> dict[str, float]:
    """The containment's own steps, no trial around them (median seconds)."""
    spent: dict[str, list[float]] = {"open": [], "worker start": [], "close": []}
    plain: list[float] = []
    sleeper = [sys.executable, "-S", "-c", "import time; time.sleep(60)"]
    for index in range(n):
        started = time.monotonic()
        held = containment.Containment(f"bench{index}", worker_prefix=f"bench{index}-")
        spent["open"].append(time.monotonic() - started)
        started = time.monotonic()
        worker = processes.Worker(
            f"bench{index}-w1", sleeper, env=os.environ, log_dir=directory, containment=held
        )
        spent["worker start"].append(time.monotonic() - started)
        started = time.monotonic()
        bare = processes.Worker(f"bare{index}", sleeper, env=os.environ, log_dir=directory)
        plain.append(time.monotonic() - started)
        worker.terminate()
        bare.terminate()
        started = time.monotonic()
        held.close()
        spent["close"].append(time.monotonic() - started)
    medians = {key: statistics.median(values) for key, values in spent.items()}
    medians["worker start, uncontained"] = statistics.median(plain)
    probe = containment.Containment("mode", worker_prefix="mode-")
    probe.close()
    medians["mode: " + probe.mode] = 0.0
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="refund")
    parser.add_argument("--fault", action="append", default=None)
    parser.add_argument("-n", type=int, default=9)
    args = parser.parse_args()
    faults = args.fault or ["kill@tool.returned#1"]
    spec = runner.TrialSpec.under(schema.find(args.scenario), faults)
    rows: dict[str, list[dict[str, float]]] = {WITH: [], WITHOUT: []}
    with shared.open_lab(commands.find("reference")) as lab, tempfile.TemporaryDirectory() as out:
        _trial(lab, spec, pathlib.Path(out))  # warm-up
        for index in range(args.n):
            for side in (WITH, WITHOUT) if index % 2 else (WITHOUT, WITH):  # neither always first
                with _switched_off() if side == WITHOUT else contextlib.nullcontext():
                    rows[side].append(_trial(lab, spec, pathlib.Path(out)))
        steps = _steps(pathlib.Path(out), args.n)
    print(f"{args.scenario} under {' '.join(faults)}: median of {args.n} trials each, ms")
    print(f"  {'':34} {WITH:>12} {WITHOUT:>12} {'added':>8}")
    for key in rows[WITH][0]:
        medians = [1000 * statistics.median(r[key] for r in rows[side]) for side in rows]
        print(f"  {key:34} {medians[0]:12.1f} {medians[1]:12.1f} {medians[0] - medians[1]:8.1f}")
    print("containment's own steps, median ms")
    for key, value in steps.items():
        print(f"  {key:34} {1000 * value:12.2f}")


if __name__ == "__main__":
    main()
