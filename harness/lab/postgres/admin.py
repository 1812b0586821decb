"""Admin connections, short-lived or kept, and waiting until a server accepts them."""

from __future__ import annotations

import collections.abc
import contextlib
import threading
import time

import psycopg
import psycopg.pq

from harness import errors

CONNECT_TIMEOUT_S = 5
POLL_INTERVAL_S = 0.05

Connection = psycopg.Connection[tuple[object, ...]]


def connect(dsn: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Connection:
    """An autocommit connection (DDL such as CREATE DATABASE cannot run in a transaction)."""
    # libpq treats a connect_timeout below 2 s as 2 s.
    return psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, int(timeout_s)))


class Kept:
    """One admin connection reused by one caller at a time: a backend's start costs Postgres
    ~2 ms of CPU, and the trial databases' renames come twice per trial. Connected on first
    use and again whenever the last use left it closed, broken or mid-statement, or the
    server's DSN changed (a promoted standby)."""

    def __init__(self, dsn: collections.abc.Callable[[], str]) -> None:
        self._dsn = dsn
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._connected_to = ""

    @contextlib.contextmanager
    def use(self) -> collections.abc.Iterator[Connection]:
        with self._lock:
            dsn = self._dsn()
            if self._conn is None or self._conn.closed or dsn != self._connected_to:
                self._drop()
                self._conn = connect(dsn)
                self._connected_to = dsn
            conn = self._conn
            try:
                yield conn
            finally:
                if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    self._drop()  # an error that broke it, or one that left it mid-statement

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None


def accepts_connections(dsn: str, *, timeout_s: float = 2) -> bool:
    try:
        with connect(dsn, timeout_s=timeout_s) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def wait_until_accepting(dsn: str, *, timeout_s: float) -> None:
    """Poll until a query succeeds (recovery after a crash can take a moment)."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with connect(dsn, timeout_s=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(POLL_INTERVAL_S)
    raise errors.EnvironmentProblem(
        f"PostgreSQL did not accept connections within {timeout_s:.0f} s: {last}"
    )
