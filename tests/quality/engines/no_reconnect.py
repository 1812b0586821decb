"""Broken variant of the reference engine: it opens its database connection once and never
opens another. When Postgres restarts (or fails over), every worker's connection dies; the
workers stay up, log "database unavailable" on every poll, claim nothing, and the run never
finishes although the database is back. Its connections are made for the process, as a pool
built at boot: a server that restarted after the process started is never reached, also by a
standby whose first connection comes after the restart (under load it may: it would then
finish the run, and the bug would hide).

    python tests/quality/engines/no_reconnect.py worker   (see no_reconnect.yaml)
"""

from __future__ import annotations

import pathlib
import sys
import time
from typing import Any

from reference_engine import cli, connection, errors, sqlfile

QUERIES = sqlfile.parse_queries(pathlib.Path(__file__).with_suffix(".sql").read_text())

_connect = connection.Connector.connect
# When this process started, to the microsecond: psutil's create_time counts from the boot
# time in whole seconds, so a server restarted just before the worker started (the lab's
# primary brought back by the trial before, after a pg_failover) read as restarted after it.
_PROCESS_STARTED = time.time()


def connect(self: connection.Connector) -> Any:
    # BROKEN: a connector whose first connection died never gets a second one
    if getattr(self, "_connected_once", False) and (self._conn is None or self._conn.closed):
        raise errors.DatabaseUnavailable("connection lost (this engine does not reconnect)")
    conn = _connect(self)
    if not getattr(self, "_connected_once", False):
        # BROKEN too: a server restarted since this process started is never reached
        row = conn.execute(QUERIES["server_restarted_since"], {"process_started": _PROCESS_STARTED})
        if row.fetchone()["restarted"]:  # type: ignore[index]
            self.close()
            raise errors.DatabaseUnavailable(
                "the database restarted (this engine does not reconnect)"
            )
    self._connected_once = True  # type: ignore[attr-defined]
    return conn


def install() -> None:
    connection.Connector.connect = connect  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
