"""Starting, stopping and promoting an embedded cluster without pg_ctl's 100 ms waits: a
start still tells a failed start from a slow one, a stop returns with the server gone."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import psycopg
import pytest

from harness import errors
from harness.lab.postgres import embedded

pytestmark = pytest.mark.postgres


@pytest.fixture
def listening() -> Iterator[int]:
    """A port another process listens on: no postmaster can bind it."""
    with socket.socket() as sock:
        sock.bind((embedded.HOST, 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_first_start_on_a_taken_port_fails_and_moves_on(
    listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = iter([listening])
    real_free_port = embedded.free_port
    monkeypatch.setattr(embedded, "free_port", lambda: next(offered, 0) or real_free_port())
    server = embedded.create()
    try:
        assert server.port != listening
        with psycopg.connect(server.dsn, connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.close()


def test_a_restart_on_a_taken_port_says_so(listening: int) -> None:
    server = embedded.create()
    try:
        server.stop_immediate()
        assert not server.is_running()
        server._port = listening  # as if another process took the port while it was down
        with pytest.raises(errors.EnvironmentProblem, match="did not start"):
            server.start()
    finally:
        server.close()


def test_a_stopped_cluster_starts_again_with_its_data() -> None:
    server = embedded.create()
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
        server.stop_immediate()
        assert not server.is_running()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.dsn, connect_timeout=2)
        server.start()
        with psycopg.connect(server.dsn, connect_timeout=10) as conn:
            assert conn.execute("SELECT n FROM kept").fetchone() == (7,)
    finally:
        server.close()
