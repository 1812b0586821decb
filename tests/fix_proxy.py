"""Toxiproxy fixtures: one real server per session, a proxy in front of Postgres per test.

No Toxiproxy means failure with directions, unless CRASHCERT_SKIP_TOXIPROXY=1 (then skip);
CRASHCERT_REQUIRE_TOXIPROXY=1 (CI) overrides the skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import pwd
import shutil
import subprocess
import sys
import typing
import uuid

import pytest

from harness import errors
from harness.lab import postgres, proxy, toxiproxy_server

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
def private_toxiproxy(toxiproxy_binary: pathlib.Path) -> typing.Iterator[proxy.Toxiproxy]:
    """A server of the test's own: its ledger and proxies are nobody else's."""
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


# -- another local user at the admin API ------------------------------------------------

ANOTHER_USER = "nobody"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # a python another user may run (not ours in /root)
# One admin API request, as another process (and user): prints its uid, then the answer.
_REQUEST = """
import json, os, sys, urllib.request
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
data = body.encode() if body else None
request = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=5) as response:
    text = response.read().decode()
print(os.getuid())
print(text)
"""


def another_user_argv() -> list[str]:
    """How to run python as another local user: `nobody` via runuser when we are root,
    else ourselves (the admin API cannot tell the difference anyway)."""
    system_python = shutil.which("python3", path=SYSTEM_PATH)
    runuser = shutil.which("runuser")
    if os.geteuid() == 0 and runuser and system_python and _user_exists(ANOTHER_USER):
        return [runuser, "-u", ANOTHER_USER, "--", system_python, "-I"]
    return [sys.executable, "-I"]


def as_another_user(
    client: proxy.Toxiproxy, method: str, path: str, body: proxy.Json = None
) -> tuple[int, proxy.Json]:
    """One request to the admin API from another process, as another user where possible:
    (its uid, the JSON answer)."""
    argv = [
        *another_user_argv(),
        "-c",
        _REQUEST,
        method,
        client.api_url + path,
        "" if body is None else json.dumps(body),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True, cwd="/")
    uid, _, text = done.stdout.partition("\n")
    return int(uid), json.loads(text) if text.strip() else None


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
