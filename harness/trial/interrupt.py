"""The user's stop (Ctrl-C) as trials see it.

KeyboardInterrupt reaches the main thread only. Trials running in pool threads learn of it
through one process-wide flag, stop waiting, and are stored as interrupted: an interrupted
trial proves nothing either way (INCONCLUSIVE), where before the teardown that followed
Ctrl-C made it an ERROR, as if the harness had broken.

SIGTERM and SIGHUP (a CI runner cancelling the job) are the same stop: `stop_on_signals`
makes them raise KeyboardInterrupt in the main thread, after setting the flag, so no trial
starts after the signal and running ones are stored as interrupted. A second signal while
the stop unwinds ends the process at once, its cleanups run (harness/lab/reaper.py).
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

NOTE = "stopped by the user (Ctrl-C or SIGTERM) before the trial ended"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

Item = TypeVar("Item")
Result = TypeVar("Result")
_requested = threading.Event()


class Sizer(Protocol):
    """`--jobs auto` (harness/pool/autojobs.py): sizes the pool while it runs."""

    @property
    def cap(self) -> int: ...

    def run(
        self, pool: concurrent.futures.Executor, function: Callable[[Any], Any], items: list[Any]
    ) -> list[Any]: ...

    def describe(self) -> str: ...


# How many trials run at once: a number, or sized by measured load.
Jobs = int | Sizer


def describe(jobs: Jobs) -> str:
    return str(jobs) if isinstance(jobs, int) else jobs.describe()


class Interrupted(Exception):
    """Raised inside a trial that was waiting when the user stopped the campaign."""


def requested() -> bool:
    return _requested.is_set()


def check() -> None:
    if _requested.is_set():
        raise Interrupted(NOTE)


def _on_stop(signum: int, frame: types.FrameType | None) -> None:
    if _requested.is_set():  # a second stop while the first unwinds: end now
        from harness.lab import reaper

        reaper.run_all()
        os._exit(128 + signum)
    _requested.set()
    raise KeyboardInterrupt


# harness/lab/reaper.py leaves a signal alone whose handler carries this mark: cleanup then
# happens as for Ctrl-C, by unwinding, not under the trials' feet.
_on_stop.crashcert_stop = True  # type: ignore[attr-defined]


def stop_on_signals() -> None:
    """From the main thread of a command: SIGTERM and SIGHUP stop it as Ctrl-C does."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) != signal.SIG_IGN:  # nohup's choice stands
            signal.signal(signum, _on_stop)


def run_pool(
    function: Callable[[Item], Result], items: Iterable[Item], *, jobs: Jobs
) -> list[Result]:
    """`function` over `items`, `jobs` at a time, results in order. On Ctrl-C, trials not
    started are dropped, running ones stop and are stored as interrupted, then it re-raises."""
    workers = max(1, jobs) if isinstance(jobs, int) else jobs.cap
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)

    def unless_stopped(item: Item) -> Result:
        check()  # a trial the pool reaches after the stop never starts
        return function(item)

    try:
        if isinstance(jobs, int):
            return list(pool.map(unless_stopped, items))
        return jobs.run(pool, unless_stopped, list(items))
    except KeyboardInterrupt:
        _requested.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        _requested.clear()  # the next campaign in this process starts afresh
