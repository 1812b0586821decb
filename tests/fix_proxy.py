"""Toxiproxy fixtures: one real server per session, a proxy in front of Postgres per test.

No Toxiproxy means failure with directions, unless CRASHCERT_SKIP_TOXIPROXY=1 (then skip);
CRASHCERT_REQUIRE_TOXIPROXY=1 (CI) overrides the skip.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import typing
import uuid

import pytest

from harness import errors, postgres, proxy, toxiproxy_server

SKIP_ENV = "CRASHCERT_SKIP_TOXIPROXY"
REQUIRE_ENV = "CRASHCERT_REQUIRE_TOXIPROXY"


def unavailable(message: str) -> typing.NoReturn:
    if os.environ.get(SKIP_ENV) == "1" and os.environ.get(REQUIRE_ENV) != "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def toxiproxy_binary() -> pathlib.Path:
    binary = toxiproxy_server.find_binary()
    if binary is None:
        unavailable(toxiproxy_server.HOW_TO_GET)
    return binary


@pytest.fixture(scope="session")
def toxiproxy(toxiproxy_binary: pathlib.Path) -> typing.Iterator[proxy.Toxiproxy]:
    try:
        server = toxiproxy_server.start(binary=toxiproxy_binary)
    except errors.EnvironmentProblem as exc:
        unavailable(str(exc))
    try:
        yield server.client
    finally:
        server.close()


@pytest.fixture
def pg_proxy(
    toxiproxy: proxy.Toxiproxy, pg_server: postgres.Server
) -> typing.Iterator[proxy.Proxy]:
    """A proxy to the session's Postgres; deleted (with its toxics) after the test."""
    handle = toxiproxy.create(f"pg-{uuid.uuid4().hex[:8]}", f"{pg_server.host}:{pg_server.port}")
    yield handle
    with contextlib.suppress(errors.CrashcertError):
        handle.delete()
