"""One trial's streaming standby and the promotion `pg_failover` makes of it.

Made only for a plan with `pg_failover` (a base backup and a second server cost seconds):
a standby of the lab's embedded primary (harness/lab/postgres/standby.py), streaming through
a Toxiproxy proxy of its own (the WAL link, which an asynchronous failover cuts first), and a
proxy for the harness's own connections (submit, report, export), which follows the
promotion as the workers' proxies do (harness/lab/database_links.py).

The standby lives as long as the trial. At its end the standby is thrown away and the old
primary, stopped hard by the failover, is started again with no synchronous standby: the
next trial finds the lab's server as it was (its trial database is dropped there).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from harness.faults import spec
from harness.lab import shared
from harness.lab.postgres import embedded, standby

log = logging.getLogger(__name__)

ACTION = "pg_failover"
SYNC_PARAM = "sync"
SYNC_ON = "1"


def synchronous(step: spec.FaultStep) -> bool:
    """`?sync=1` (the default) or `?sync=0`."""
    return str(step.params.get(SYNC_PARAM, SYNC_ON)) == SYNC_ON


class Failover:
    """The standby, its WAL link, the harness's link, and whether the promotion happened."""

    def __init__(self, lab: shared.Lab, database: str, *, sync: bool) -> None:
        assert lab.toxiproxy is not None and isinstance(lab.pg, embedded.EmbeddedServer)
        self._lab = lab
        self._primary: embedded.EmbeddedServer = lab.pg
        self.sync = sync
        self.promoted = False
        self.paused_at: int | None = None  # seq of the hit WAL shipping was paused at
        self._proxies: list[Any] = []
        address = f"{self._primary.host}:{self._primary.port}"
        self._wal = self._proxy(f"{database}-wal", address)
        self._harness = self._proxy(f"{database}-harness", address)
        try:
            self.standby = standby.create(
                self._primary, upstream=(self._wal.listen_host, self._wal.listen_port)
            )
        except BaseException:
            self._delete_proxies()
            raise
        try:
            if sync:
                standby.require_sync(self._primary, on=True)
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> tuple[str, int]:
        return self.standby.host, self.standby.port

    def harness_dsn(self, dsn: str) -> str:
        """The trial's database for the harness's own calls, through its proxy."""
        return str(self._harness.dsn_through(dsn))

    def pause_shipping(self, seq: int) -> str:
        """Once the standby has what the primary flushed so far, cut its WAL link: what the
        primary acknowledges from now on is on the primary alone. The LSN it had."""
        lsn = standby.flushed(self._primary)
        standby.wait_caught_up(self._primary, lsn)
        self._wal.disable()
        self.paused_at = seq
        return lsn

    def fail_over(self) -> dict[str, Any]:
        """Stop the primary hard, promote the standby, point the harness's link at it; what
        each server had: the primary's last flushed LSN, the standby's last received."""
        flushed = standby.flushed(self._primary)
        self._primary.stop_immediate()
        received = standby.received(self.standby)
        self.standby.promote()
        self.promoted = True
        self._harness.repoint(f"{self.standby.host}:{self.standby.port}")
        return {
            "primary_flushed_lsn": flushed,
            "standby_received_lsn": received,
            "behind": standby.behind(received, flushed),
        }

    def close(self) -> None:
        """Throw the standby away; the lab's primary running again, asynchronous."""
        try:
            self.standby.close()
            if not self._primary.is_running():
                self._primary.start()
            standby.require_sync(self._primary, on=False)
        finally:
            self._delete_proxies()

    def _delete_proxies(self) -> None:
        for proxy in self._proxies:
            with contextlib.suppress(Exception):
                proxy.delete()

    def _proxy(self, name: str, upstream: str) -> Any:
        assert self._lab.toxiproxy is not None
        proxy = self._lab.toxiproxy.create(name, upstream=upstream)
        self._proxies.append(proxy)
        return proxy


def for_plan(
    lab: shared.Lab, plan: Sequence[spec.FaultStep], database: str, stack: contextlib.ExitStack
) -> Failover | None:
    """The trial's standby when its plan fails over and the lab can make one (an embedded
    cluster and Toxiproxy); else None, and the fault is recorded as not applied."""
    steps = [step for step in plan if step.action == ACTION]
    if not steps or lab.toxiproxy is None or not isinstance(lab.pg, embedded.EmbeddedServer):
        return None
    failover = Failover(lab, database, sync=synchronous(steps[0]))
    stack.callback(failover.close)
    return failover
