"""Broken variant of the reference engine: it opens its database connection once and never
opens another. When Postgres restarts (or fails over), every worker's connection dies; the
workers stay up, log "database unavailable" on every poll, claim nothing, and the run never
finishes although the database is back.

    python tests/quality/engines/no_reconnect.py worker   (see no_reconnect.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, connection, errors

_connect = connection.Connector.connect


def connect(self: connection.Connector) -> Any:
    # BROKEN: a connector whose first connection died never gets a second one
    if getattr(self, "_connected_once", False) and (self._conn is None or self._conn.closed):
        raise errors.DatabaseUnavailable("connection lost (this engine does not reconnect)")
    conn = _connect(self)
    self._connected_once = True  # type: ignore[attr-defined]
    return conn


def install() -> None:
    connection.Connector.connect = connect  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
