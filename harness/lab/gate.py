"""Trials sharing one Postgres run side by side, except one that restarts it: that runs alone.

A restart kills every connection on the server, so a trial running next to it would see
its own database vanish mid-setup and end as a harness ERROR through no fault of its engine.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class SharedExclusive:
    """Many holders at once, or one exclusive holder alone."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[None]:
        with self._condition:
            if exclusive:
                self._condition.wait_for(lambda: not self._exclusive and self._shared == 0)
                self._exclusive = True
            else:
                self._condition.wait_for(lambda: not self._exclusive)
                self._shared += 1
        try:
            yield
        finally:
            with self._condition:
                if exclusive:
                    self._exclusive = False
                else:
                    self._shared -= 1
                self._condition.notify_all()
