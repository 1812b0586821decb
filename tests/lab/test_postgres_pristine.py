"""Clusters made from the machine's pristine data directory: each its own password, and a
cache others could write to never used."""

from __future__ import annotations

import os
import pathlib

import psycopg
import pytest
from psycopg import conninfo

from harness.lab import cache
from harness.lab.postgres import embedded, scram

pytestmark = pytest.mark.postgres


def _identity(server: embedded.EmbeddedServer) -> int:
    with psycopg.connect(server.dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    assert row is not None
    return int(row[0])


def _stored_verifier(server: embedded.EmbeddedServer) -> str:
    with psycopg.connect(server.dsn, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = current_user"
        ).fetchone()
    assert row is not None
    return str(row[0])


def _with_password_of(dsn: str, other: str) -> str:
    password = conninfo.conninfo_to_dict(other)["password"]
    return conninfo.make_conninfo(dsn, password=password)


@pytest.fixture
def private_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    return root


def test_a_copied_cluster_has_a_password_of_its_own(private_cache: pathlib.Path) -> None:
    """And both ways of making a cluster store only the one-iteration verifier of its random
    password (scram.py): initdb's password file and the copy's single-user ALTER ROLE."""
    first = embedded.create()  # initdb, kept as the pristine copy
    try:
        assert list((private_cache / "pgdata").iterdir()), "initdb's result was not kept"
        second = embedded.create()  # copied
        try:
            # The same initdb (pg_control's identifier) serves both ...
            assert _identity(second) == _identity(first)
            # ... and the first cluster's password does not open the second.
            with pytest.raises(psycopg.OperationalError, match="password authentication"):
                psycopg.connect(_with_password_of(second.dsn, first.dsn), connect_timeout=10)
            for server in (first, second):
                stored = _stored_verifier(server)
                assert stored.startswith(f"SCRAM-SHA-256${scram.ITERATIONS}:"), stored
                assert str(conninfo.conninfo_to_dict(server.dsn)["password"]) not in stored
        finally:
            second.close()
    finally:
        first.close()


def test_a_cache_others_can_write_to_is_not_used(private_cache: pathlib.Path) -> None:
    first = embedded.create()
    try:
        os.chmod(private_cache / "pgdata", 0o777)  # another account could plant a cluster
        second = embedded.create()
        try:
            assert _identity(second) != _identity(first), "the untrusted copy was used"
        finally:
            second.close()
    finally:
        first.close()
