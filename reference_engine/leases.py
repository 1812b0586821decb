"""A worker's lease on a run, and the checks outside any transition that it still holds.

Inside a transition the lease is checked under the run's row lock (transitions.py); here
it is renewed by the heartbeat and checked before an external side effect.

A claim also takes the run's session-level advisory lock when it is free (`locked`): the
holder's death is then seen the way any deployment sees it, its database session ends and
Postgres frees the lock, and reconciliation takes the run without waiting out the lease. A
holder whose session ended but who lives on (a cut link, a restarted server) takes the lock
again on its new session before its next external call, or stops.
"""

from __future__ import annotations

import dataclasses
import time

from reference_engine import connection, errors


@dataclasses.dataclass(frozen=True)
class Lease:
    run_id: str
    worker_id: str
    epoch: int
    attempts: int = 0
    locked: bool = False  # the claim took the run's advisory lock


def extend(db: connection.Connector, lease: Lease, lease_ms: int) -> bool:
    """False when the lease is no longer ours to extend."""
    row = db.one(
        "extend_lease",
        run_id=lease.run_id,
        worker_id=lease.worker_id,
        lease_epoch=lease.epoch,
        lease_ms=lease_ms,
    )
    return row is not None


def ensure_live(db: connection.Connector, lease: Lease, *, margin_s: float = 0.1) -> None:
    """Called right before an external side effect (tool request, reply, model call).

    A worker paused past its lease wakes up here and stops, instead of repeating an
    effect its successor already resolved. The server's "still yours" can arrive late
    over a slow link, so the lease must still run `margin_s` after the answer came back,
    counted from when the question left. A pause between this check and the request is
    the one window no lease can fence: that request is truly in flight.
    """
    if lease.locked and lease.run_id not in db.session_locks:
        # the session that took the lock ended: a reconciliation may be taking the run now
        relocked = db.one("relock_run", run_id=lease.run_id)
        if relocked is None or not relocked["locked"]:
            raise errors.LeaseLost(
                f"run {lease.run_id}: the session that held its lock ended, and it is taken"
            )
        db.session_locks.add(lease.run_id)
    asked = time.monotonic()
    row = db.one(
        "lease_still_live",
        run_id=lease.run_id,
        worker_id=lease.worker_id,
        lease_epoch=lease.epoch,
    )
    if row is None or not row["live"]:
        raise errors.LeaseLost(f"lease on run {lease.run_id} lapsed before an external call")
    expires = asked + float(row["remaining_ms"]) / 1000.0
    if time.monotonic() + margin_s > expires:
        raise errors.LeaseLost(
            f"lease on run {lease.run_id} may lapse before an external call "
            f"(the check took {time.monotonic() - asked:.3f}s)"
        )


def unlock(db: connection.Connector, lease: Lease) -> None:
    """Done with the run: free its advisory lock if this session holds it (a lock of an
    ended session is gone already). The lease itself ends by its own transitions."""
    if lease.run_id not in db.session_locks:
        return
    db.session_locks.discard(lease.run_id)
    try:
        db.one("unlock_run", run_id=lease.run_id)
    except errors.DatabaseUnavailable:
        pass  # the session, and with it the lock, is gone
