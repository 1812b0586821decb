"""A worker's lease on a run, and the checks outside any transition that it still holds.

Inside a transition the lease is checked under the run's row lock (transitions.py); here
it is renewed by the heartbeat and checked before an external side effect.
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
