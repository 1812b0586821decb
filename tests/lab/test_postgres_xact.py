"""What became of a transaction whose COMMIT was in flight (harness/lab/postgres/xact.py)."""

from __future__ import annotations

import psycopg
import pytest

from harness.lab.postgres import xact

pytestmark = pytest.mark.postgres


def test_full_xid_takes_the_epoch_of_the_newest_xid() -> None:
    assert xact.full_xid(750, 800) == 750
    assert xact.full_xid(750, (3 << 32) | 800) == (3 << 32) | 750
    # an xid from just before the counter wrapped belongs to the previous epoch
    assert xact.full_xid(2**32 - 5, (3 << 32) | 10) == (2 << 32) | (2**32 - 5)


def _open_writing_transaction(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(dsn)
    conn.execute("CREATE TABLE IF NOT EXISTS t (v int)")
    conn.execute("INSERT INTO t VALUES (1)")  # the session now idles in a writing transaction
    return conn


def test_a_held_transaction_that_commits(fresh_database: str) -> None:
    conn = _open_writing_transaction(fresh_database)
    xids = xact.in_flight(fresh_database)
    assert len(xids) == 1
    conn.commit()
    conn.close()
    assert xact.fate(fresh_database, xids) == (xact.COMMITTED, f"xid {xids[0]} committed")


def test_a_held_transaction_whose_session_dies_is_aborted(fresh_database: str) -> None:
    conn = _open_writing_transaction(fresh_database)
    xids = xact.in_flight(fresh_database)
    conn.close()  # the link is cut before COMMIT: the server rolls back
    outcome, why = xact.fate(fresh_database, xids)
    assert outcome == xact.ABORTED, why


def test_reading_only_or_idle_sessions_are_not_in_flight(fresh_database: str) -> None:
    with psycopg.connect(fresh_database) as reader:
        reader.execute("SELECT 1")  # idle in transaction, but no xid
        assert xact.in_flight(fresh_database) == []


def test_two_open_transactions_make_the_fate_unknown(fresh_database: str) -> None:
    first = _open_writing_transaction(fresh_database)
    first.commit()
    second = psycopg.connect(fresh_database)
    second.execute("INSERT INTO t VALUES (2)")
    first.execute("INSERT INTO t VALUES (3)")
    try:
        xids = xact.in_flight(fresh_database)
        outcome, why = xact.fate(fresh_database, xids)
        assert outcome == xact.UNKNOWN
        assert "2 transactions were open" in why
    finally:
        first.close()
        second.close()


def test_an_xid_still_running_after_the_timeout_is_unknown(fresh_database: str) -> None:
    conn = _open_writing_transaction(fresh_database)
    try:
        xids = xact.in_flight(fresh_database)
        outcome, why = xact.fate(fresh_database, xids, timeout_s=0.2)
        assert outcome == xact.UNKNOWN
        assert "still in progress" in why
    finally:
        conn.close()
