"""A server someone else runs (`--pg-dsn` / CRASHCERT_PG_DSN): used, never restarted."""

from __future__ import annotations

from harness import errors
from harness.lab.postgres import admin, dsn


class ExternalServer:
    """Wraps a DSN. Its database is the admin database (the user may own no other)."""

    def __init__(self, admin_dsn: str, *, description: str = "an external server") -> None:
        self._dsn = admin_dsn
        self._host, self._port = dsn.address(admin_dsn)
        self._description = description

    @property
    def dsn(self) -> str:
        return self._dsn

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    def database_dsn(self, name: str) -> str:
        return dsn.with_database(self._dsn, name)

    def stop_immediate(self) -> None:
        raise errors.CrashcertError(
            f"cannot stop PostgreSQL at {self._host}:{self._port}: it is {self._description}, "
            "not a cluster the harness owns; Postgres-restart faults need the embedded provider "
            "(unset CRASHCERT_PG_DSN)"
        )

    def start(self) -> None:
        raise errors.CrashcertError(
            f"cannot start PostgreSQL at {self._host}:{self._port}: it is {self._description}, "
            "not a cluster the harness owns"
        )

    def is_running(self) -> bool:
        return admin.accepts_connections(self._dsn)

    def close(self) -> None:
        """Nothing to release: the server is not ours."""


def open_checked(admin_dsn: str) -> ExternalServer:
    """An ExternalServer, after checking that the DSN really reaches a server."""
    try:
        admin.wait_until_accepting(admin_dsn, timeout_s=admin.CONNECT_TIMEOUT_S)
    except errors.EnvironmentProblem as exc:
        raise errors.EnvironmentProblem(f"cannot reach the PostgreSQL given by DSN: {exc}") from exc
    return ExternalServer(admin_dsn)
