"""The quality modules' trials, all submitted up front and run as `--jobs auto` finds room.

A module's fixture submits every trial it needs, starts the pool and yields the futures; a
test waits for its own. Most trials wait (worker start-up, leases): the auto pool grows
while the CPU idles (harness/pool/concurrency.py); `CRASHCERT_QUALITY_JOBS=N` fixes the
number instead. A hung engine's trial waits out its scenario's 20-25 s deadline doing
nothing: it runs beside the pool (submit_beside), where a fixed pool of two spent those
waits with a slot idle.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from harness.pool import autojobs
from harness.trial import interrupt

_Job = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class TrialPool:
    def __init__(self, jobs: str | None = None) -> None:
        self._jobs = autojobs.parse(jobs or os.environ.get("CRASHCERT_QUALITY_JOBS", "auto"))
        self._queued: list[_Job] = []
        self._beside: list[_Job] = []
        self._threads: list[threading.Thread] = []

    def submit(
        self, function: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        return self._queue(self._queued, function, args, kwargs)

    def submit_beside(
        self, function: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        """A trial known to wait out its deadline (a hung engine: 20-25 s, idle) runs in a
        thread of its own from start(), beside the pool: in a slot it would hold the pool
        (whose size changes only as trials end) for its whole wait."""
        return self._queue(self._beside, function, args, kwargs)

    def _queue(
        self, queue: list[_Job], function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> concurrent.futures.Future[Any]:
        if self._threads:
            raise RuntimeError("the pool already started: submit every trial first")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        queue.append((future, function, args, kwargs))
        return future

    def start(self) -> None:
        self._threads = [
            threading.Thread(target=_run_one, args=(job,), name="quality-hung", daemon=True)
            for job in self._beside
        ]
        self._threads.append(
            threading.Thread(
                target=interrupt.run_pool,
                args=(_run_one, self._queued),
                kwargs={"jobs": self._jobs},
                name="quality-trials",
                daemon=True,
            )
        )
        for thread in self._threads:
            thread.start()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Started on entry; on exit, trials not started never start and the running ones
        end (a module fixture yields its futures inside)."""
        self.start()
        try:
            yield
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Trials not started never start; the running ones end before it returns."""
        for future, *_ in self._queued:
            future.cancel()
        for thread in self._threads:
            thread.join()

    def describe(self) -> str:
        return interrupt.describe(self._jobs)


def _run_one(job: _Job) -> Any:
    """The trial's outcome, for the auto pool to measure (None when it raised)."""
    future, function, args, kwargs = job
    if not future.set_running_or_notify_cancel():
        return None  # cancelled by shutdown before its turn
    try:
        result = function(*args, **kwargs)
    except BaseException as error:  # the test that waits for it sees it, not the pool
        future.set_exception(error)
        return None
    future.set_result(result)
    return result
