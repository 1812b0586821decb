"""Collects a trial's harness-side events in order, stamped with the world's sequence clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from harness.record import history
from harness.world import ledger


class Recorder:
    def __init__(self, counter: ledger.SequenceCounter | None = None) -> None:
        self._counter = counter or ledger.SequenceCounter()
        self._changed = threading.Condition()
        self._events: list[history.Event] = []

    def tick(self) -> int:
        """A point on the world's sequence clock: what the world records later is after it."""
        return self._counter.next()

    def append(self, event: history.Event) -> history.Event:
        stamped = event.model_copy(update={"seq": self._counter.next(), "t": time.time()})
        with self._changed:
            self._events.append(stamped)
            self._changed.notify_all()
        return stamped

    def wait_for(
        self, predicate: Callable[[history.BoundaryHit], bool], *, timeout: float
    ) -> history.BoundaryHit | None:
        """Block until a recorded hit satisfies `predicate` (a signal, not a sleep loop)."""
        deadline = time.monotonic() + timeout
        seen = 0  # events are only appended: each wake-up looks at the new ones alone
        with self._changed:
            while True:
                for event in self._events[seen:]:
                    if isinstance(event, history.BoundaryHit) and predicate(event):
                        return event
                seen = len(self._events)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def events(self) -> list[history.Event]:
        with self._changed:
            return list(self._events)

    def boundary_hits(self) -> list[history.BoundaryHit]:
        return [event for event in self.events() if isinstance(event, history.BoundaryHit)]
