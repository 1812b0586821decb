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
from typing import Any

import psutil

from reference_engine import cli, connection, errors, sqlfile

QUERIES = sqlfile.parse_queries(pathlib.Path(__file__).with_suffix(".sql").read_text())

_connect = connection.Connector.connect


def connect(self: connection.Connector) -> Any:
    # BROKEN: a connector whose first connection died never gets a second one
    if getattr(self, "_connected_once", False) and (self._conn is None or self._conn.closed):
        raise errors.DatabaseUnavailable("connection lost (this engine does not reconnect)")
    conn = _connect(self)
    if not getattr(self, "_connected_once", False):
        # BROKEN too: a server restarted since this process started is never reached
        started = psutil.Process().create_time()
        row = conn.execute(QUERIES["server_restarted_since"], {"process_started": started})
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
