"""Building and rewriting libpq connection strings (key=value or URL form)."""

from __future__ import annotations

from psycopg import conninfo


def make(*, host: str, port: int, dbname: str, user: str, password: str | None = None) -> str:
    """A key=value DSN for a TCP server."""
    parts: dict[str, str | int] = {"host": host, "port": port, "dbname": dbname, "user": user}
    if password is not None:
        parts["password"] = password
    return conninfo.make_conninfo("", **parts)


def with_database(dsn: str, dbname: str) -> str:
    """The same server and credentials, another database."""
    return conninfo.make_conninfo(dsn, dbname=dbname)


def with_address(dsn: str, *, host: str, port: int) -> str:
    """The same database and credentials through another host and port (e.g. a proxy)."""
    # hostaddr would override host; drop it so the new address is the one used.
    params = conninfo.conninfo_to_dict(dsn)
    params.pop("hostaddr", None)
    params.update(host=host, port=port)
    return conninfo.make_conninfo("", **params)


def address(dsn: str) -> tuple[str, int]:
    """(host, port) the DSN points at, with libpq's defaults for missing parts."""
    params = conninfo.conninfo_to_dict(dsn)
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    return host, int(params.get("port") or 5432)


def database(dsn: str) -> str | None:
    value = conninfo.conninfo_to_dict(dsn).get("dbname")
    return None if value is None else str(value)
