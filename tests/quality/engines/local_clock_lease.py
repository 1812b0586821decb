"""Broken variant of the reference engine: it judges its lease by its own wall clock.

At each claim or renewal it notes when the lease ends as `time.time() + lease`, and from
then on trusts that note instead of the database: the heartbeat renews only when its clock
says a third of the lease is gone, and neither the check before an external call nor the
one under the run's row lock before COMMIT asks who holds the lease. While the worker's
clock agrees with the database's (one host, NTP) this looks right, even under a pause (the
wall clock runs on while SIGSTOPped). A clock that falls behind (clock_skew, offset_s < 0)
keeps it from renewing: the database lets the lease lapse, another worker adopts the run,
and this one, still "holding" by its clock, commits on: lease.fencing. The clock must fall
behind after a note (a skew at run.claimed comes before the heartbeat's first note, which
then agrees with the skewed clock), and the stale worker must reach a transition whose SQL
has no epoch guard of its own (finish_delivered, as in skip_lease_check): the quality case
pauses it before its reply and kills the adopter at the adopter's reply.sending.

    python tests/quality/engines/local_clock_lease.py worker   (see local_clock_lease.yaml)
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import crashcert_probe
from reference_engine import cli, connection, errors, events, leases, transitions
from reference_engine import heartbeat as heartbeat_module

# (run, epoch) -> when the lease ends by this process's wall clock
_ENDS: dict[tuple[str, int], float] = {}
_LOCK = threading.Lock()


def _note(lease: leases.Lease, lease_ms: int) -> None:
    with _LOCK:
        _ENDS[(lease.run_id, lease.epoch)] = time.time() + lease_ms / 1000.0


def _left_s(lease: leases.Lease) -> float:
    with _LOCK:
        return _ENDS.get((lease.run_id, lease.epoch), 0.0) - time.time()


_start = heartbeat_module.Heartbeat.start


def _started(self: heartbeat_module.Heartbeat) -> heartbeat_module.Heartbeat:
    _note(self.lease, self.lease_ms)  # claimed just now
    return _start(self)


def _run(self: heartbeat_module.Heartbeat) -> None:
    """Heartbeat._run, renewing only when the local clock says it is due."""
    interval = self.lease_ms / 3000.0
    while not self._stop.wait(interval):
        # BROKEN: the wall clock decides whether the lease needs renewing
        if _left_s(self.lease) > 2 * self.lease_ms / 3000.0:
            continue
        try:
            if not leases.extend(self._db, self.lease, self.lease_ms):
                self.lost.set()
                return
            _note(self.lease, self.lease_ms)
        except (errors.DatabaseUnavailable, errors.RetryableConflict):
            continue


def _ensure_live(db: connection.Connector, lease: leases.Lease, **_: Any) -> None:
    """BROKEN: leases.ensure_live by the local clock, without asking the database."""
    if _left_s(lease) <= 0:
        raise errors.LeaseLost(f"lease on run {lease.run_id} ended (by this worker's clock)")


def _fenced(
    self: transitions.Transitions, lease: leases.Lease, body: transitions.Body
) -> transitions.Mark:
    """Transitions._fenced with the lease judged by the local clock (the only change)."""
    with events.transaction(self.db, redact=self.redact) as tx:
        row = tx.one("lock_run", run_id=lease.run_id)
        if row is None:
            raise errors.NotFound(f"no run {lease.run_id}")
        # BROKEN: owner, epoch and expiry come from this worker's clock, not the row
        if row["status"] != "running" or _left_s(lease) <= 0:
            raise errors.LeaseLost(f"run {lease.run_id}: lease gone (by this worker's clock)")
        if row["cancel_requested"]:
            transitions.cancel(tx, lease)
            mark = transitions.Mark("run.finished", {"status": "cancelled"}, cancelled=True)
        else:
            mark = body(tx)
        tx.flush()
        if mark.boundary is not None:
            self.reporter.report(
                mark.boundary + crashcert_probe.BEFORE_COMMIT, lease.run_id, **mark.detail
            )
    if mark.boundary is not None:
        self.reporter.report(mark.boundary, lease.run_id, **mark.detail)
    if mark.cancelled:
        raise errors.RunCancelled(f"run {lease.run_id} was cancelled")
    return mark


def install() -> None:
    heartbeat_module.Heartbeat.start = _started  # type: ignore[method-assign]
    heartbeat_module.Heartbeat._run = _run  # type: ignore[method-assign]
    leases.ensure_live = _ensure_live
    transitions.Transitions._fenced = _fenced  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
