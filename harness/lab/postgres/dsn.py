"""Building and rewriting libpq connection strings (key=value or URL form)."""

from __future__ import annotations

import collections.abc
import re

import psycopg
from psycopg import conninfo

# Keys of a libpq DSN whose values are secrets.
SECRET_KEYS = frozenset({"password", "sslpassword"})
# Command-line options whose value is a DSN: crashcert's --pg-dsn, incident export's --dsn.
DSN_OPTIONS = frozenset({"--pg-dsn", "--dsn"})
REDACTED = "***"
# The password in a URL's user info (postgresql://user:secret@host), up to the first `@`.
_URL_SECRET = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):[^@\s]*@")
# password=..., sslpassword=..., PGPASSWORD=... in key=value text or a URL's query string;
# a quoted value may hold spaces and escaped quotes.
_KEY_SECRET = re.compile(r"(?i)\b((?:ssl|pg)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'?|[^\s&]*)")


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


def redact(dsn: str) -> str:
    """The DSN without its secrets, safe to print or store.

    A DSN libpq can parse loses its password keys (libpq then takes the password from
    PGPASSWORD or ~/.pgpass, so the result still works there); any other text has whatever
    looks like a password replaced by `***`.
    """
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:  # not a DSN: scrub it as free text
        return redact_text(dsn)
    if not SECRET_KEYS & params.keys():
        return dsn
    return conninfo.make_conninfo(
        "", **{key: value for key, value in params.items() if key not in SECRET_KEYS}
    )


def redact_text(text: str) -> str:
    """`scheme://user:secret@` and `password=secret` inside free text, with the secret gone."""
    text = _URL_SECRET.sub(r"\1@", text)
    return _KEY_SECRET.sub(lambda match: f"{match.group(1)}={REDACTED}", text)


def redact_argv(argv: collections.abc.Sequence[str]) -> list[str]:
    """A command line fit to store: the value of every DSN option and embedded secrets redacted."""
    redacted: list[str] = []
    value_follows = False
    for arg in argv:
        name, equals, value = arg.partition("=")
        if value_follows:
            redacted.append(redact(arg))
        elif name in DSN_OPTIONS and equals:
            redacted.append(f"{name}={redact(value)}")
        else:
            redacted.append(redact_text(arg))
        value_follows = not value_follows and arg in DSN_OPTIONS
    return redacted
