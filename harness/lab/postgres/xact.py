"""The fate of a transaction whose COMMIT a fault left in flight, read from Postgres itself.

At a `:before_commit` point the held worker's session sits idle in a transaction that has
written, so it has an xid. The harness notes that xid before it breaks the link and, once
the link is healed and the session has ended, asks `pg_xact_status`: committed or aborted,
whatever the engine believes. Reading the engine's tables instead would credit the worker
with changes another worker made meanwhile.
"""

from __future__ import annotations

import time

import psycopg

from harness import errors
from harness.lab.postgres import admin

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"

# Sessions of this database holding a transaction open between statements, with an xid,
# and a brand-new xid as a full 64-bit value (its epoch dates the 32-bit backend_xid).
_IN_FLIGHT = """
SELECT backend_xid::text::bigint, pg_current_xact_id()::text::bigint
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state = 'idle in transaction' AND backend_xid IS NOT NULL
"""
_STATUS = "SELECT pg_xact_status(%s::text::xid8)"
_POLL_S = 0.05


def full_xid(xid: int, newest: int) -> int:
    """A 32-bit xid widened with the epoch of `newest`, a full xid assigned after it."""
    candidate = (newest >> 32 << 32) | xid
    return candidate - (1 << 32) if candidate > newest else candidate


def in_flight(dsn: str) -> list[int]:
    """Full xids of the database's sessions idle inside a writing transaction."""
    try:
        with admin.connect(dsn) as conn:
            rows = conn.execute(_IN_FLIGHT).fetchall()
    except psycopg.Error as error:
        raise errors.EnvironmentProblem(f"cannot list open transactions: {error}") from error
    return sorted(full_xid(int(str(xid)), int(str(newest))) for xid, newest in rows)


def fate(dsn: str, xids: list[int], *, timeout_s: float = 5.0) -> tuple[str, str]:
    """(COMMITTED | ABORTED | UNKNOWN, why) for the one transaction held at the boundary.

    Waits while it is still in progress: the session ends only when its server process
    notices the cut connection.
    """
    if len(xids) != 1:
        return UNKNOWN, f"{len(xids)} transactions were open at the boundary, not one: {xids}"
    (xid,) = xids
    deadline = time.monotonic() + timeout_s
    try:
        with admin.connect(dsn) as conn:
            while True:
                row = conn.execute(_STATUS, (str(xid),)).fetchone()
                status = row[0] if row else None
                if status in (COMMITTED, ABORTED):
                    return str(status), f"xid {xid} {status}"
                if time.monotonic() >= deadline:
                    return UNKNOWN, f"xid {xid} still {status} after {timeout_s:.0f}s"
                time.sleep(_POLL_S)
    except psycopg.Error as error:
        return UNKNOWN, f"xid {xid}: {error}"
