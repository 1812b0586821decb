"""Trial databases made ahead of time, and reset or dropped after the trial has moved on.

Cloning the template takes ~0.1 s and dropping a trial's database ~0.03 s, both on the
trial's critical path until now. A background thread keeps `size` spare clones ready; a
trial renames one to its own name (a catalog update of a few milliseconds) and hands its
database back. A handed-back database is reset in place (recycle.py: renamed, emptied,
and kept only with the fingerprint of a fresh clone), about a fifth of a clone's Postgres
CPU, and otherwise dropped; up to 2 x `size` reset databases are kept, so once the pool is
warm a trial's database is the previous trial's, reset. When no spare is ready the caller
clones at once, in its own thread: it may hold the lab's gate exclusively (a Postgres
restart trial), and the background thread takes the gate shared for each clone, reset or
drop, so it never works while Postgres is being restarted and a trial never waits for it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable

from harness.lab.postgres import admin, recycle, server, templates

log = logging.getLogger(__name__)

# A spare failed to clone (Postgres restarting, disk full): try again after this long.
RETRY_S = 0.5
SPARE_PREFIX = "cc_spare_"

Hold = Callable[[], contextlib.AbstractContextManager[object]]


class Spares:
    def __init__(self, server_: server.Server, template: str, *, size: int, hold: Hold) -> None:
        self._server = server_
        self._template = template
        self._size = size
        self._hold = hold
        self._ready: collections.deque[str] = collections.deque()
        self._doomed: collections.deque[str] = collections.deque()
        self._returned: collections.deque[str] = collections.deque()
        # a fresh clone's fingerprint, read from the first spare made (None: not yet)
        self._pristine: recycle.Pristine | None = None
        self._wake = threading.Condition()
        self._closed = False
        # an admin connection each for the trials' renames and for this thread's resets
        self._for_takes = admin.Kept(lambda: server_.dsn)
        self._for_resets = admin.Kept(lambda: server_.dsn)
        self._thread = threading.Thread(target=self._work, name="db-spares", daemon=True)
        self._thread.start()

    def take(self, name: str) -> str:
        """A database called `name` cloned from the template; returns its DSN."""
        with self._wake:
            spare = self._ready.popleft() if self._ready else None
        try:
            if spare is not None:
                try:
                    templates.rename(self._for_takes, spare, name)
                    return self._server.database_dsn(name)
                except Exception as error:  # the shortcut failed: the usual way
                    log.info("spare %s not usable (%s); cloning instead", spare, error)
                    self.drop_later(spare)
            return templates.clone(self._server, self._template, name)
        finally:
            with self._wake:  # one fewer spare: make another, but not beside the rename
                self._wake.notify_all()

    def give_back(self, name: str) -> None:
        """A trial is done with database `name`: reset it for another trial, or drop it."""
        with self._wake:
            self._returned.append(name)
            self._wake.notify_all()

    def drop_later(self, name: str) -> None:
        with self._wake:
            self._doomed.append(name)
            self._wake.notify_all()

    def close(self) -> None:
        """Drops what is pending and every unused spare, then stops."""
        with self._wake:
            self._closed = True
            self._doomed.extend(self._ready)
            self._doomed.extend(self._returned)
            self._ready.clear()
            self._returned.clear()
            self._wake.notify_all()
        self._thread.join()
        self._for_takes.close()
        self._for_resets.close()

    def _work(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(self._has_work)
                if self._doomed:
                    job = ("drop", self._doomed.popleft())
                elif self._closed:
                    return
                elif self._returned:
                    job = ("reset", self._returned.popleft())
                else:
                    job = ("clone", f"{SPARE_PREFIX}{uuid.uuid4().hex[:12]}")
            kind, name = job
            if not self._run(kind, name) and not self._closed:
                with self._wake:
                    self._wake.wait(RETRY_S)

    def _has_work(self) -> bool:
        return (
            bool(self._doomed)
            or self._closed
            or bool(self._returned)
            or len(self._ready) < self._size
        )

    def _run(self, kind: str, name: str) -> bool:
        if kind == "reset":
            self._reset(name)
            return True
        try:
            with self._hold():
                if kind == "drop":
                    templates.drop(self._server, name)
                else:
                    templates.clone(self._server, self._template, name)
                    kind = "fingerprint"  # cloned; a failure from here leaves it made
                    if self._pristine is None:
                        self._pristine = recycle.Pristine.of(self._server.database_dsn(name))
        except Exception as error:  # this thread must outlive a bad moment
            log.info("%s of %s failed: %s", kind, name, error)
            if kind in ("drop", "fingerprint") and not self._closed:
                self.drop_later(name)  # Postgres was away: a later try
            return False
        if kind == "fingerprint":
            self._keep(name)
        return True

    def _reset(self, name: str) -> None:
        """A handed-back database as a spare again, when the pool wants one and the reset
        leaves it a fresh clone's twin; else dropped."""
        with self._wake:
            wanted = len(self._ready) < 2 * self._size and not self._closed
        pristine = self._pristine
        if not wanted or pristine is None:
            self.drop_later(name)
            return
        spare = f"{SPARE_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            with self._hold():
                if recycle.reset(self._server, self._for_resets, name, spare, pristine):
                    self._keep(spare)
                    return
                log.info("database %s differs from a fresh clone after its reset", name)
        except Exception as error:  # dropped below, the usual way
            log.info("reset of %s failed: %s", name, error)
        # it is under one name or the other; dropping a missing one does nothing
        self.drop_later(name)
        self.drop_later(spare)

    def _keep(self, name: str) -> None:
        with self._wake:
            if self._closed:
                self._doomed.append(name)
            else:
                self._ready.append(name)
