"""What every provider hands out: a PostgreSQL server the harness can use (and maybe crash)."""

from __future__ import annotations

import typing

# The superuser of clusters the harness creates; external servers use whatever the DSN says.
SUPERUSER = "postgres"
ADMIN_DATABASE = "postgres"


class Server(typing.Protocol):
    """A PostgreSQL server. Only servers the harness owns can be stopped and started."""

    @property
    def dsn(self) -> str:
        """Admin DSN (superuser, database `postgres` for servers we own)."""
        ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    def database_dsn(self, name: str) -> str:
        """DSN of database `name` on this server, with the admin credentials."""
        ...

    def stop_immediate(self) -> None:
        """Crash-like stop (`pg_ctl stop -m immediate`): no checkpoint, recovery on start."""
        ...

    def start(self) -> None:
        """Start again on the same port and data directory; return once it accepts connections."""
        ...

    def is_running(self) -> bool: ...

    def close(self) -> None:
        """Release everything (stop, remove files); idempotent."""
        ...
