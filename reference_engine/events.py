"""The event trail, and the transaction every write of the engine runs in.

Events are buffered and written in one statement just before COMMIT (one round trip, in
the order they happened); a transaction that rolls back takes its events with it.
"""

from __future__ import annotations

import collections.abc
import contextlib
from typing import Any

from reference_engine import connection, leases
from reference_engine import redact as redact_module

# What an event is about: a run under a lease (stamped with its worker and epoch), or a
# bare run id (a command or maintenance, no worker).
About = leases.Lease | str


def run_of(about: About) -> str:
    return about.run_id if isinstance(about, leases.Lease) else about


class Tx:
    """One transaction of the engine: its statements, and the events it appends."""

    def __init__(self, db: connection.Transaction, *, redact: bool) -> None:
        self.db = db
        self.redact = redact
        self._events: list[dict[str, Any]] = []

    def all(self, query: str, /, **params: Any) -> list[connection.Row]:
        return self.db.all(query, **params)

    def one(self, query: str, /, **params: Any) -> connection.Row | None:
        return self.db.one(query, **params)

    def event(
        self, about: About, kind: str, /, *, lease_epoch: int | None = None, **data: Any
    ) -> None:
        """Append one event. `lease_epoch` is for a bare run id only: the epoch of a lease
        that is not ours (reconciling an expired one)."""
        if isinstance(about, leases.Lease):
            assert lease_epoch is None, "a lease brings its own epoch"
            worker_id: str | None = about.worker_id
            lease_epoch = about.epoch
        else:
            worker_id = None
        payload = connection.jsonable(data)
        if self.redact:
            payload = redact_module.redact(payload)
        self._events.append(
            {
                "run_id": run_of(about),
                "kind": kind,
                "worker_id": worker_id,
                "lease_epoch": lease_epoch,
                "data": payload,
            }
        )

    def flush(self) -> None:
        """Write the buffered events now (a transition does, before its boundary report)."""
        if self._events:
            self.db.all("insert_events", events=list(self._events))
            self._events.clear()


@contextlib.contextmanager
def transaction(db: connection.Connector, *, redact: bool = False) -> collections.abc.Iterator[Tx]:
    """One transaction whose events are written before it commits."""
    with db.transaction() as raw:
        tx = Tx(raw, redact=redact)
        yield tx
        tx.flush()
