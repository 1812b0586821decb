"""Trial databases made ahead of time, and dropped after the trial has moved on.

Cloning the template takes ~0.1 s and dropping a trial's database ~0.03 s, both on the
trial's critical path until now. A background thread keeps `size` spare clones ready; a
trial renames one to its own name (a catalog update of a few milliseconds) and hands its
database back for dropping. When no spare is ready the caller clones at once, in its own
thread: it may hold the lab's gate exclusively (a Postgres restart trial), and the
background thread takes the gate shared for each clone or drop, so it never works while
Postgres is being restarted and a trial never waits for it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable

from harness.lab.postgres import server, templates

log = logging.getLogger(__name__)

# A spare failed to clone (Postgres restarting, disk full): try again after this long.
RETRY_S = 0.5
SPARE_PREFIX = "cc_spare_"

Hold = Callable[[], contextlib.AbstractContextManager[None]]


class Spares:
    def __init__(self, server_: server.Server, template: str, *, size: int, hold: Hold) -> None:
        self._server = server_
        self._template = template
        self._size = size
        self._hold = hold
        self._ready: collections.deque[str] = collections.deque()
        self._doomed: collections.deque[str] = collections.deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="db-spares", daemon=True)
        self._thread.start()

    def take(self, name: str) -> str:
        """A database called `name` cloned from the template; returns its DSN."""
        with self._wake:
            spare = self._ready.popleft() if self._ready else None
            self._wake.notify_all()  # one fewer spare: make another
        if spare is not None:
            try:
                return templates.rename(self._server, spare, name)
            except Exception as error:  # the shortcut failed: the usual way
                log.info("spare %s not usable (%s); cloning instead", spare, error)
                self.drop_later(spare)
        return templates.clone(self._server, self._template, name)

    def drop_later(self, name: str) -> None:
        with self._wake:
            self._doomed.append(name)
            self._wake.notify_all()

    def close(self) -> None:
        """Drops what is pending and every unused spare, then stops."""
        with self._wake:
            self._closed = True
            self._doomed.extend(self._ready)
            self._ready.clear()
            self._wake.notify_all()
        self._thread.join()

    def _work(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(self._has_work)
                if self._doomed:
                    job = ("drop", self._doomed.popleft())
                elif self._closed:
                    return
                else:
                    job = ("clone", f"{SPARE_PREFIX}{uuid.uuid4().hex[:12]}")
            kind, name = job
            if not self._run(kind, name) and not self._closed:
                with self._wake:
                    self._wake.wait(RETRY_S)

    def _has_work(self) -> bool:
        return bool(self._doomed) or self._closed or len(self._ready) < self._size

    def _run(self, kind: str, name: str) -> bool:
        try:
            with self._hold():
                if kind == "drop":
                    templates.drop(self._server, name)
                else:
                    templates.clone(self._server, self._template, name)
        except Exception as error:  # this thread must outlive a bad moment
            log.info("%s of %s failed: %s", kind, name, error)
            if kind == "drop" and not self._closed:
                self.drop_later(name)  # Postgres was away: a later try
            return False
        if kind == "clone":
            with self._wake:
                if self._closed:
                    self._doomed.append(name)
                else:
                    self._ready.append(name)
        return True
