"""One Toxiproxy proxy per worker on its database link, so a database fault can hit one
worker alone (harness/nemesis/links.py strikes them)."""

from __future__ import annotations

import logging
import time
from typing import Any

from harness.lab import proxy_audit, shared

log = logging.getLogger(__name__)


class DatabaseLinks:
    """One Toxiproxy proxy per worker, so a database fault can hit one worker alone."""

    def __init__(self, lab: shared.Lab, dsn: str, *, prefix: str) -> None:
        self._lab = lab
        self._dsn = dsn
        self._prefix = prefix
        self._since = time.monotonic()
        self._upstream = f"{lab.pg.host}:{lab.pg.port}"
        self.by_worker: dict[str, Any] = {}

    def dsn_for(self, worker_id: str) -> str:
        if self._lab.toxiproxy is None:
            return self._dsn
        proxy = self._lab.toxiproxy.create(f"{self._prefix}-{worker_id}", upstream=self._upstream)
        self.by_worker[worker_id] = proxy
        return str(proxy.dsn_through(self._dsn))

    def repoint(self, host: str, port: int) -> None:
        """A failover: every worker's proxy, and each made from now on, forwards to the
        promoted standby (the workers keep their DATABASE_URL, as behind a managed DNS name)."""
        self._upstream = f"{host}:{port}"
        for proxy in list(self.by_worker.values()):
            proxy.repoint(self._upstream)

    def close(self) -> None:
        """Audit the server first (tampering raises: the trial's harness error), then delete."""
        try:
            if self._lab.toxiproxy is not None:
                proxy_audit.check_trial(
                    self._lab.toxiproxy, self.by_worker.values(), since=self._since
                )
        finally:
            for proxy in self.by_worker.values():
                _quietly(proxy.delete)


def _quietly(function: Any) -> None:
    try:
        function()
    except Exception as error:  # cleanup must not hide the trial's own outcome
        log.debug("cleanup step failed: %s", error)
