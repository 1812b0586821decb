"""Broken variant of the reference engine: it no longer checks that it still holds the lease
(owner, epoch, expiry): not under the run's row lock before COMMIT, nor right before an
external call.
A paused zombie that wakes up after another worker adopted its run commits anyway wherever
the SQL itself carries no epoch guard (finishing the run after delivering the reply).

    python tests/quality/engines/skip_lease_check.py worker   (see skip_lease_check.yaml)
"""

from __future__ import annotations

import collections.abc
import sys
from typing import Any

from reference_engine import boundary as boundary_module
from reference_engine import cli, errors
from reference_engine import store as store_module


def _transition(
    self: store_module.Store,
    lease: store_module.Lease,
    body: collections.abc.Callable[[Any], store_module.Mark],
) -> store_module.Mark:
    """Store._transition, minus the lease checks (the only change)."""
    conn = self.connect()
    with self._classified():
        with conn.transaction():
            row = self._one(conn, "lock_run", run_id=lease.run_id)
            if row is None:
                raise errors.NotFound(f"no run {lease.run_id}")
            # BROKEN: no check of status, lease_owner, lease_epoch and lease_live here
            if row["cancel_requested"]:
                self._cancel(conn, lease.run_id, worker_id=lease.worker_id, epoch=lease.epoch)
                mark = store_module.Mark("run.finished", {"status": "cancelled"}, cancelled=True)
            else:
                mark = body(conn)
            if mark.boundary is not None:
                self.reporter.report(
                    mark.boundary + boundary_module.BEFORE_COMMIT, lease.run_id, **mark.detail
                )
            # BROKEN: nor whether the lease expired while the transaction ran
    if mark.boundary is not None:
        self.reporter.report(mark.boundary, lease.run_id, **mark.detail)
    if mark.cancelled:
        raise errors.RunCancelled(f"run {lease.run_id} was cancelled")
    return mark


def _ensure_live(self: store_module.Store, lease: store_module.Lease, **_: Any) -> None:
    """BROKEN: Store.ensure_live, the check before an external call, does nothing."""


def install() -> None:
    store_module.Store._transition = _transition  # type: ignore[method-assign]
    store_module.Store.ensure_live = _ensure_live  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
