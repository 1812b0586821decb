"""Collects a trial's harness-side events in order, stamped with the world's sequence clock."""

from __future__ import annotations

import threading
import time

from harness import history
from harness.world import ledger


class Recorder:
    def __init__(self, counter: ledger.SequenceCounter | None = None) -> None:
        self._counter = counter or ledger.SequenceCounter()
        self._lock = threading.Lock()
        self._events: list[history.Event] = []

    def append(self, event: history.Event) -> history.Event:
        stamped = event.model_copy(update={"seq": self._counter.next(), "t": time.time()})
        with self._lock:
            self._events.append(stamped)
        return stamped

    def events(self) -> list[history.Event]:
        with self._lock:
            return list(self._events)

    def boundary_hits(self) -> list[history.BoundaryHit]:
        return [event for event in self.events() if isinstance(event, history.BoundaryHit)]
