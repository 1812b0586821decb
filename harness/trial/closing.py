"""Teardown steps a trial no longer waits for one after another.

Once every worker is confirmed dead and the world's ledgers are copied, stopping the world's
services, the control server and the proxies decides nothing: they stop in threads while
the runner asks for the final report and tables, and the trial joins them (and meets their
errors, a proxy audit's tampering among them) before it is judged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Closing:
    def __init__(self) -> None:
        self._started: dict[Callable[[], None], _Step] = {}

    def begin(self, step: Callable[[], None]) -> None:
        """Start `step` in the background (once)."""
        if step not in self._started:
            self._started[step] = _Step(step)

    def finish(self, step: Callable[[], None]) -> None:
        """Wait for `step` if it was begun, else run it now; its error is raised here."""
        started = self._started.get(step)
        if started is None:
            step()
        else:
            started.join()


class _Step:
    def __init__(self, step: Callable[[], None]) -> None:
        self._step = step
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="trial-closing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._step()
        except BaseException as error:  # handed to the trial's thread in join()
            self._error = error

    def join(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
