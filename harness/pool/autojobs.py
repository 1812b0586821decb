"""`--jobs auto`: the glue between the trial pool and the pure controller (concurrency.py).

After each trial it reads the machine (CPU pressure, load average, idle CPU) and the trial's
worker start to first boundary, and keeps as many trials in flight as the controller says.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import time
from collections.abc import Callable
from typing import Any

from harness import errors
from harness.pool import concurrency
from harness.trial import runner

AUTO = "auto"
PRESSURE = pathlib.Path("/proc/pressure/cpu")


def cores() -> int:
    """The CPUs this process may run on (a container's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pressure(path: pathlib.Path = PRESSURE) -> float | None:
    """`some avg10` of the CPU pressure file; None where the kernel has no PSI."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for field in fields[1:]:
                name, _, value = field.partition("=")
                if name == "avg10":
                    try:
                        return float(value)
                    except ValueError:
                        return None
    return None


STAT = pathlib.Path("/proc/stat")
IDLE_WINDOW_S = 2.0  # shorter spans see one trial's burst, not the machine


class IdleMeter:
    """The share of CPU time idle (idle and iowait, all CPUs) over the last IDLE_WINDOW_S or
    more, from /proc/stat; None until one window has passed, or where there is no such file.
    `readings` numbers the windows measured so far (the controller waits for one that began
    after it changed the limit)."""

    def __init__(
        self, path: pathlib.Path = STAT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._path = path
        self._clock = clock
        self._last: tuple[float, int, int] | None = None  # (when, idle, total) ticks
        self._value: float | None = None
        self.readings = 0

    def __call__(self) -> float | None:
        ticks = self._ticks()
        if ticks is None:
            return None
        now = self._clock()
        if self._last is None:
            self._last = (now, *ticks)
        elif now - self._last[0] >= IDLE_WINDOW_S:
            total = ticks[1] - self._last[2]
            if total > 0:
                self._value = (ticks[0] - self._last[1]) / total
                self.readings += 1
            self._last = (now, *ticks)
        return self._value

    def _ticks(self) -> tuple[int, int] | None:
        try:
            fields = self._path.read_text().split("\n", 1)[0].split()
            # cpu user nice system idle iowait irq softirq steal (guest is within user)
            user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[1:9])
        except (OSError, ValueError):
            return None
        busy = user + nice + system + irq + softirq + steal
        return idle + iowait, busy + idle + iowait


def load_per_core(count: int) -> float | None:
    try:
        return os.getloadavg()[0] / max(1, count)
    except OSError:
        return None


def latency(outcome: runner.TrialOutcome) -> float | None:
    """Worker start to first boundary: None for a trial without boundaries (a black box)."""
    trial = outcome.history
    hits = trial.boundary_hits()
    if not hits or trial.workers_started_at is None:
        return None
    return max(0.0, hits[0].t - trial.workers_started_at)


class Auto:
    """A Sizer for interrupt.run_pool; one per command, so certify's passes learn as one."""

    def __init__(
        self,
        controller: concurrency.Controller | None = None,
        *,
        machine: Callable[[], concurrency.Sample] | None = None,
    ) -> None:
        count = cores()
        self.controller = controller or concurrency.Controller(count)
        idle = IdleMeter()

        def read() -> concurrency.Sample:
            share = idle()
            return concurrency.Sample(
                pressure=pressure(),
                load=load_per_core(count),
                idle=share,
                idle_window=idle.readings if share is not None else None,
            )

        self._machine = machine or read

    @property
    def cap(self) -> int:
        return self.controller.cap

    def finished(self, result: object) -> concurrency.Decision:
        measured = latency(result) if isinstance(result, runner.TrialOutcome) else None
        kind = result.history.engine if isinstance(result, runner.TrialOutcome) else ""
        sample = dataclasses.replace(self._machine(), latency=measured, kind=kind)
        return self.controller.observe(sample)

    def run(
        self, pool: concurrent.futures.Executor, function: Callable[[Any], Any], items: list[Any]
    ) -> list[Any]:
        """`function` over `items` with at most the controller's limit in flight, in order."""
        results: list[Any] = [None] * len(items)
        running: dict[concurrent.futures.Future[Any], int] = {}
        following = 0
        while following < len(items) or running:
            while following < len(items) and len(running) < self.controller.limit:
                running[pool.submit(function, items[following])] = following
                following += 1
            done, _ = concurrent.futures.wait(
                running, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                index = running.pop(future)
                results[index] = future.result()  # a trial that raised stops the campaign
                self.finished(results[index])
        return results

    def describe(self) -> str:
        return self.controller.describe()


# Each trial runs workers and a world of its own: beyond this a machine only thrashes.
MAX_JOBS = 256


def parse(text: str | int) -> int | Auto:
    """`--jobs`: a number of trials at once, or `auto`."""
    if isinstance(text, int):
        return max(1, text)
    if text.strip().lower() == AUTO:
        return Auto()
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_JOBS:
        raise errors.CrashcertError(f"--jobs {text[:40]!r}: a number from 1 to {MAX_JOBS}, or auto")
    return number
