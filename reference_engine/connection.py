"""The only module that touches psycopg: connecting, transactions, named queries, and what a
database error means to the engine.

Errors are classified by SQLSTATE class, never by message text:

* no SQLSTATE (the client lost the socket), class 08 (connection exception), 57 (operator
  intervention: admin/crash shutdown, cannot connect now, query cancelled), 53
  (insufficient resources) and 25P03 (idle-in-transaction timeout) mean *the database is
  unavailable*: the connection is discarded and `errors.DatabaseUnavailable` is raised.
  If that happened while COMMIT was in flight, the commit's outcome is unknown. Callers
  must never assume it committed or not: they reconnect with backoff and re-read durable
  state, and carry on only if they still hold the lease (`decide` works from that state).
* class 40 (serialization failure 40001, deadlock 40P01) raises `errors.RetryableConflict`;
  the transaction rolled back and can be retried.
* anything else is a bug or a constraint doing its job and propagates.
"""

from __future__ import annotations

import collections.abc
import contextlib
import datetime
import decimal
import uuid
from typing import Any

import psycopg
import psycopg.errors
import psycopg.rows
import psycopg.types.json

from reference_engine import errors, sqlfile

Row = dict[str, Any]
_UNAVAILABLE_CLASSES = frozenset({"08", "57", "53"})
_UNAVAILABLE_STATES = frozenset({"25P03"})


def classify(error: psycopg.Error) -> errors.EngineError | None:
    """Map a psycopg error to the engine's error, or None when it must propagate."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is None:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return errors.DatabaseUnavailable(f"database unavailable: {error}")
        return None
    if sqlstate[:2] == "40":
        return errors.RetryableConflict(f"transaction conflict ({sqlstate}): {error}")
    if sqlstate[:2] in _UNAVAILABLE_CLASSES or sqlstate in _UNAVAILABLE_STATES:
        return errors.DatabaseUnavailable(f"database unavailable ({sqlstate}): {error}")
    return None


def jsonable(value: Any) -> Any:
    """A row (or event payload) as plain JSON values: the types psycopg decodes to."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


def _adapt(params: collections.abc.Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: psycopg.types.json.Jsonb(value) if isinstance(value, dict | list) else value
        for key, value in params.items()
    }


def _execute(conn: psycopg.Connection[Row], query: str, params: dict[str, Any]) -> Any:
    return conn.execute(sqlfile.query(query), _adapt(params))


class Transaction:
    """Statements inside one open transaction, each a named query from queries.sql."""

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self._conn = conn

    def all(self, query: str, /, **params: Any) -> list[Row]:
        cursor = _execute(self._conn, query, params)
        return cursor.fetchall() if cursor.description else []

    def one(self, query: str, /, **params: Any) -> Row | None:
        rows = self.all(query, **params)
        return rows[0] if rows else None

    def rowcount(self, query: str, /, **params: Any) -> int:
        """How many rows a statement without RETURNING changed."""
        return int(_execute(self._conn, query, params).rowcount)

    def script(self, sql: str) -> None:
        """A migration file as it is: several statements, no parameters."""
        self._conn.execute(sql.encode())


class Connector:
    """One lazily (re)opened connection in autocommit mode; transactions are explicit."""

    def __init__(
        self,
        dsn: str,
        *,
        application_name: str = "reference_engine",
        idle_in_transaction_ms: int = 0,
    ) -> None:
        self.dsn = dsn
        self.application_name = application_name
        self.idle_in_transaction_ms = idle_in_transaction_ms
        self._conn: psycopg.Connection[Row] | None = None
        # Keys of the session-level advisory locks the current session took: they end with
        # it, so a new connection starts with none.
        self.session_locks: set[str] = set()

    def connect(self) -> psycopg.Connection[Row]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self.session_locks.clear()  # a connection lost without close(): its session too
        options = f"-c idle_in_transaction_session_timeout={self.idle_in_transaction_ms}"
        with self.classified():
            self._conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                row_factory=psycopg.rows.dict_row,
                application_name=self.application_name,
                connect_timeout=5,
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
                tcp_user_timeout=10_000,
                options=options,
            )
        return self._conn

    def close(self) -> None:
        self.session_locks.clear()
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    @contextlib.contextmanager
    def classified(self) -> collections.abc.Iterator[None]:
        try:
            yield
        except psycopg.Error as error:
            mapped = classify(error)
            if mapped is None:
                raise
            if isinstance(mapped, errors.DatabaseUnavailable):
                self.close()  # its state is unknown; never reuse it
            raise mapped from error

    @contextlib.contextmanager
    def transaction(self) -> collections.abc.Iterator[Transaction]:
        """BEGIN ... COMMIT, or ROLLBACK when the block raises."""
        conn = self.connect()
        with self.classified(), conn.transaction():
            yield Transaction(conn)

    def one(self, query: str, /, **params: Any) -> Row | None:
        """A single statement on its own, outside any transaction."""
        conn = self.connect()
        with self.classified():
            cursor = _execute(conn, query, params)
            rows: list[Row] = cursor.fetchall() if cursor.description else []
        return rows[0] if rows else None
