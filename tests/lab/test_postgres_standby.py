"""The streaming standby pg_failover promotes: what it has after a promotion is what
synchronous replication promised, or what asynchronous replication shipped."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from harness.lab import proxy
from harness.lab.postgres import accounts, admin, dsn, embedded, server, standby

pytestmark = [pytest.mark.postgres, pytest.mark.toxiproxy]


@pytest.fixture
def primary() -> Iterator[embedded.EmbeddedServer]:
    cluster = embedded.create()  # our own: the test stops it
    try:
        yield cluster
    finally:
        cluster.close()


def rows(server_dsn: str) -> list[int]:
    with admin.connect(server_dsn) as conn:
        return [int(str(row[0])) for row in conn.execute("SELECT n FROM t ORDER BY n")]


def insert(server_dsn: str, n: int) -> None:
    with admin.connect(server_dsn) as conn:
        conn.execute("INSERT INTO t VALUES (%s)", (n,))


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
def test_a_promoted_standby_has_what_its_replication_promised(
    primary: embedded.EmbeddedServer, toxiproxy: proxy.Toxiproxy, sync: bool
) -> None:
    wal = toxiproxy.create(
        f"standby-{uuid.uuid4().hex[:8]}", upstream=f"{primary.host}:{primary.port}"
    )
    try:
        replica = standby.create(primary, upstream=(wal.listen_host, wal.listen_port))
        try:
            with admin.connect(primary.dsn) as conn:
                conn.execute("CREATE TABLE t (n int)")
            insert(primary.dsn, 1)
            if sync:
                standby.require_sync(primary, on=True)
            else:  # shipping paused once the standby has row 1: row 2 is the primary's alone
                standby.wait_caught_up(primary, standby.flushed(primary))
                wal.disable()
            insert(primary.dsn, 2)  # acknowledged either way
            flushed = standby.flushed(primary)
            primary.stop_immediate()
            received = standby.received(replica)
            replica.promote()
            assert standby.behind(received, flushed) is not sync
            assert rows(replica.dsn) == ([1, 2] if sync else [1])
            insert(replica.dsn, 3)  # the promoted standby takes writes
            assert rows(replica.dsn)[-1] == 3
            # As private as the primary: loopback only, a password, the server account.
            assert replica.host == "127.0.0.1" and replica.port != primary.port
            anonymous = dsn.make(
                host=replica.host, port=replica.port, dbname=server.ADMIN_DATABASE, user="postgres"
            )
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(anonymous, connect_timeout=2, passfile="/dev/null").close()
            account = accounts.server_account()
            if account is not None:
                assert os.stat(replica.datadir).st_uid == account.uid
        finally:
            replica.close()
        assert not replica.root.exists()
    finally:
        wal.delete()
