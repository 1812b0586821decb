"""PostgreSQL fixtures: one server per session, a fresh cloned database per test."""

from __future__ import annotations

import typing
import uuid

import pytest

from harness.lab import postgres
from harness.lab.postgres import external, templates

EMPTY_TEMPLATE = "crashcert_empty_template"


@pytest.fixture(scope="session")
def pg_server() -> typing.Iterator[postgres.Server]:
    """Embedded throwaway cluster, or the server named by $CRASHCERT_PG_DSN."""
    with postgres.provide() as server:
        yield server


@pytest.fixture(scope="session")
def pg_empty_template(pg_server: postgres.Server) -> str:
    templates.ensure_template(pg_server, EMPTY_TEMPLATE, lambda dsn: None)
    return EMPTY_TEMPLATE


@pytest.fixture
def fresh_database(pg_server: postgres.Server, pg_empty_template: str) -> typing.Iterator[str]:
    """DSN of a new database cloned from an empty template, dropped after the test."""
    ensure_running(pg_server)
    name = f"crashcert_test_{uuid.uuid4().hex[:12]}"
    dsn = templates.clone(pg_server, pg_empty_template, name)
    yield dsn
    # A test may have crashed the shared server; later tests need it back.
    ensure_running(pg_server)
    templates.drop(pg_server, name)


@pytest.fixture
def restartable_pg(pg_server: postgres.Server) -> typing.Iterator[postgres.Server]:
    """The session server, for tests that stop and start it (not possible for external ones)."""
    if isinstance(pg_server, external.ExternalServer):
        pytest.skip("the server from CRASHCERT_PG_DSN is not ours to stop and start")
    yield pg_server
    ensure_running(pg_server)


def ensure_running(server: postgres.Server) -> None:
    if not server.is_running():
        server.start()
