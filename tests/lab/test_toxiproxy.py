"""The real Toxiproxy in front of Postgres: cuts, heals and toxics make psycopg fail for real."""

from __future__ import annotations

import pathlib
import socket
import time

import psutil
import psycopg
import pytest

from harness import errors
from harness.lab import proxy, toxiproxy_server
from harness.lab.postgres import embedded

CONNECT_TIMEOUT_S = 2  # libpq's minimum


def _query(dsn: str) -> object:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        row = conn.execute("SELECT 42").fetchone()
    return None if row is None else row[0]


def test_dsn_through_rewrites_only_the_address() -> None:
    handle = proxy.Proxy(
        proxy.Toxiproxy("127.0.0.1", 1),
        {"name": "p", "upstream": "127.0.0.1:5432", "listen": "127.0.0.1:40001"},
    )
    rewritten = handle.dsn_through("postgresql://alice:pw@db.example:5432/app?hostaddr=10.0.0.1")
    params = psycopg.conninfo.conninfo_to_dict(rewritten)
    assert params == {
        "host": "127.0.0.1",
        "port": "40001",
        "user": "alice",
        "password": "pw",
        "dbname": "app",
    }


def test_client_requests_are_bounded_by_a_timeout() -> None:
    # A socket that accepts connections (kernel backlog) but never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        client = proxy.Toxiproxy("127.0.0.1", silent.getsockname()[1], timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(errors.EnvironmentProblem, match="did not answer"):
            client.version()
        assert time.monotonic() - started < 5


def test_missing_binary_says_how_to_get_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CRASHCERT_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert toxiproxy_server.find_binary() is None
    assert toxiproxy_server.main(["path"]) == 1
    assert "python -m harness.lab.toxiproxy_server build" in capsys.readouterr().err
    with pytest.raises(errors.EnvironmentProblem, match="needs Go"):
        toxiproxy_server.start()


@pytest.mark.toxiproxy
def test_server_runs_on_loopback_and_stops_by_pid(toxiproxy_binary: pathlib.Path) -> None:
    server = toxiproxy_server.start(binary=toxiproxy_binary)
    process = psutil.Process(server.pid)
    assert server.client.answers()
    assert server.host == "127.0.0.1"
    server.close()
    assert not process.is_running()
    assert not server.client.answers()
    server.close()  # idempotent


@pytest.mark.toxiproxy
def test_start_moves_on_when_the_port_is_taken(
    toxiproxy_binary: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        taken = squatter.getsockname()[1]
        offered = iter([taken])
        real_free_port = embedded.free_port
        monkeypatch.setattr(embedded, "free_port", lambda: next(offered, 0) or real_free_port())
        server = toxiproxy_server.start(binary=toxiproxy_binary)
        try:
            assert server.port != taken
            assert server.client.answers()
        finally:
            server.close()


@pytest.mark.postgres
@pytest.mark.toxiproxy
def test_cut_makes_queries_fail_and_heal(pg_proxy: proxy.Proxy, fresh_database: str) -> None:
    through = pg_proxy.dsn_through(fresh_database)
    conn = psycopg.connect(through, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    assert conn.execute("SELECT 1").fetchone() == (1,)

    pg_proxy.disable()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    with pytest.raises(psycopg.OperationalError):
        _query(through)

    pg_proxy.enable()
    assert _query(through) == 42


@pytest.mark.postgres
@pytest.mark.toxiproxy
def test_cut_context_heals_on_exit(pg_proxy: proxy.Proxy, fresh_database: str) -> None:
    through = pg_proxy.dsn_through(fresh_database)
    with pg_proxy.cut():
        assert not pg_proxy.enabled
        with pytest.raises(psycopg.OperationalError):
            _query(through)
    assert _query(through) == 42


@pytest.mark.postgres
@pytest.mark.toxiproxy
@pytest.mark.parametrize("stream", ["downstream", "upstream"])
@pytest.mark.parametrize(
    ("toxic", "attributes"),
    [
        ("reset_peer", {"timeout": 0}),
        ("timeout", {"timeout": 0}),
        ("limit_data", {"bytes": 1}),
        ("bandwidth", {"rate": 0}),
    ],
)
def test_breaking_toxics_fail_connections_until_removed(
    pg_proxy: proxy.Proxy,
    fresh_database: str,
    toxic: str,
    attributes: dict[str, int],
    stream: proxy.Stream,
) -> None:
    through = pg_proxy.dsn_through(fresh_database)
    name = pg_proxy.add_toxic(toxic, stream=stream, attributes=attributes)
    assert [t["name"] for t in pg_proxy.toxics()] == [name]
    with pytest.raises(psycopg.OperationalError):
        _query(through)
    pg_proxy.remove_toxics()
    assert pg_proxy.toxics() == []
    assert _query(through) == 42


@pytest.mark.postgres
@pytest.mark.toxiproxy
@pytest.mark.parametrize("stream", ["downstream", "upstream"])
def test_latency_slows_queries(
    pg_proxy: proxy.Proxy, fresh_database: str, stream: proxy.Stream
) -> None:
    through = pg_proxy.dsn_through(fresh_database)
    with psycopg.connect(through, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        pg_proxy.add_toxic("latency", stream=stream, attributes={"latency": 200}, name="slow")
        started = time.monotonic()
        conn.execute("SELECT 1")
        assert time.monotonic() - started >= 0.2
        pg_proxy.remove_toxic("slow")


@pytest.mark.toxiproxy
def test_bad_toxics_are_rejected(pg_proxy: proxy.Proxy) -> None:
    with pytest.raises(errors.CrashcertError, match="unknown toxic type"):
        pg_proxy.add_toxic("gremlins")
    with pytest.raises(errors.CrashcertError, match="stream"):
        pg_proxy.add_toxic("latency", stream="sideways")  # type: ignore[arg-type]


@pytest.mark.toxiproxy
def test_proxies_are_listed_and_deleted(toxiproxy: proxy.Toxiproxy) -> None:
    handle = toxiproxy.create("crashcert-listing", "127.0.0.1:9")
    assert handle.listen_host == "127.0.0.1" and handle.listen_port > 0
    assert "crashcert-listing" in [p.name for p in toxiproxy.proxies()]
    assert toxiproxy.get("crashcert-listing").listen == handle.listen
    handle.delete()
    with pytest.raises(errors.CrashcertError, match="404"):
        toxiproxy.get("crashcert-listing")


@pytest.mark.docker
def test_testcontainers_toxiproxy() -> None:
    from harness.lab.postgres import containers

    if not containers.docker_engine_answers():
        pytest.skip(containers.NO_DOCKER)
    with toxiproxy_server.provide(provider="testcontainers") as client:
        assert client.answers()


@pytest.mark.parametrize(
    ("skip", "require", "outcome"),
    [("", "", "fail"), ("1", "", "skip"), ("1", "1", "fail"), ("", "1", "fail")],
)
def test_missing_toxiproxy_fails_unless_skipping_is_allowed(
    monkeypatch: pytest.MonkeyPatch, skip: str, require: str, outcome: str
) -> None:
    from tests import fix_proxy

    monkeypatch.setenv(fix_proxy.SKIP_ENV, skip)
    monkeypatch.setenv(fix_proxy.REQUIRE_ENV, require)
    expected = pytest.skip.Exception if outcome == "skip" else pytest.fail.Exception
    with pytest.raises(expected, match="toxiproxy_server build"):
        fix_proxy.unavailable(toxiproxy_server.HOW_TO_GET)
