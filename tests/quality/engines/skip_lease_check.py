"""Broken variant of the reference engine: it no longer checks that it still holds the lease
(owner, epoch, expiry): not under the run's row lock before COMMIT, nor right before an
external call.
A paused zombie that wakes up after another worker adopted its run commits anyway wherever
the SQL itself carries no epoch guard (finishing the run after delivering the reply).

    python tests/quality/engines/skip_lease_check.py worker   (see skip_lease_check.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

import crashcert_probe
from reference_engine import cli, connection, errors, events, leases, transitions


def _fenced(
    self: transitions.Transitions, lease: leases.Lease, body: transitions.Body
) -> transitions.Mark:
    """Transitions._fenced, minus the lease checks (the only change)."""
    with self.db.transaction() as raw:
        # a bare transaction, as this variant always had: its events are never written
        tx = events.Tx(raw, redact=self.redact)
        row = tx.one("lock_run", run_id=lease.run_id)
        if row is None:
            raise errors.NotFound(f"no run {lease.run_id}")
        # BROKEN: no check of status, lease_owner, lease_epoch and lease_live here
        if row["cancel_requested"]:
            transitions.cancel(tx, lease)
            mark = transitions.Mark("run.finished", {"status": "cancelled"}, cancelled=True)
        else:
            mark = body(tx)
        if mark.boundary is not None:
            self.reporter.report(
                mark.boundary + crashcert_probe.BEFORE_COMMIT, lease.run_id, **mark.detail
            )
        # BROKEN: nor whether the lease expired while the transaction ran
    if mark.boundary is not None:
        self.reporter.report(mark.boundary, lease.run_id, **mark.detail)
    if mark.cancelled:
        raise errors.RunCancelled(f"run {lease.run_id} was cancelled")
    return mark


def _ensure_live(db: connection.Connector, lease: leases.Lease, **_: Any) -> None:
    """BROKEN: leases.ensure_live, the check before an external call, does nothing."""


def install() -> None:
    transitions.Transitions._fenced = _fenced  # type: ignore[method-assign]
    leases.ensure_live = _ensure_live


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
