"""The user's stop (Ctrl-C) as trials see it.

KeyboardInterrupt reaches the main thread only. Trials running in pool threads learn of it
through one process-wide flag, stop waiting, and are stored as interrupted: an interrupted
trial proves nothing either way (INCONCLUSIVE), where before the teardown that followed
Ctrl-C made it an ERROR, as if the harness had broken.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

NOTE = "stopped by the user (Ctrl-C) before the trial ended"

Item = TypeVar("Item")
Result = TypeVar("Result")
_requested = threading.Event()


class Sizer(Protocol):
    """`--jobs auto` (harness/campaigns/autojobs.py): sizes the pool while it runs."""

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


def run_pool(
    function: Callable[[Item], Result], items: Iterable[Item], *, jobs: Jobs
) -> list[Result]:
    """`function` over `items`, `jobs` at a time, results in order. On Ctrl-C, trials not
    started are dropped, running ones stop and are stored as interrupted, then it re-raises."""
    workers = max(1, jobs) if isinstance(jobs, int) else jobs.cap
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        if isinstance(jobs, int):
            return list(pool.map(function, items))
        return jobs.run(pool, function, list(items))
    except KeyboardInterrupt:
        _requested.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        _requested.clear()  # the next campaign in this process starts afresh
