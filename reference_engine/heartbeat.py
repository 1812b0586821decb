"""Lease heartbeat: a thread with its own connection extends the lease every lease/3.

The connection is the worker's (one per worker, kept from run to run: a new one per claim
cost a SCRAM handshake each time), never the transitions' one, so a long transition does
not hold up an extension.

If an extension finds no row (another epoch, expired, cancelled to terminal) the `lost`
flag is set and the worker stops touching the run. SIGSTOP stops this thread too, so a
paused worker's lease lapses: that is intended, and fencing makes its late writes fail.
"""

from __future__ import annotations

import logging
import threading

from reference_engine import connection, errors, leases

logger = logging.getLogger(__name__)


class Heartbeat:
    def __init__(self, db: connection.Connector, lease: leases.Lease, *, lease_ms: int) -> None:
        self.lease = lease
        self.lease_ms = lease_ms
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._db = db
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.lease_ms / 1000.0 + 5)
        if self._thread.is_alive():
            self._db.close()  # stuck in a call: its state is unknown; the next one reconnects

    def _run(self) -> None:
        interval = self.lease_ms / 3000.0
        while not self._stop.wait(interval):
            try:
                if not leases.extend(self._db, self.lease, self.lease_ms):
                    self.lost.set()
                    return
            except (errors.DatabaseUnavailable, errors.RetryableConflict) as error:
                # keep trying; the lease lapses by itself if the outage outlasts it
                logger.warning("heartbeat for run %s failed: %s", self.lease.run_id, error)


def connector(dsn: str, *, worker_id: str, lease_ms: int) -> connection.Connector:
    """The connection a worker's heartbeats share."""
    return connection.Connector(
        dsn,
        application_name=f"heartbeat {worker_id}",
        idle_in_transaction_ms=max(2 * lease_ms, 1000),
    )
