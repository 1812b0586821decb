"""SQL lives in .sql files: numbered migrations and named queries parsed once."""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re

from reference_engine import errors

SQL_DIR = pathlib.Path(__file__).resolve().parent / "sql"
_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")
_MIGRATION = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclasses.dataclass(frozen=True)
class Migration:
    number: int
    name: str
    sql: str


def parse_queries(text: str) -> dict[str, str]:
    """`-- name: x` blocks -> {x: sql}; comments before the first name are the preamble."""
    queries: dict[str, str] = {}
    current: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is None:
            return
        body = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()
        if not body:
            raise errors.ConfigError(f"query {current!r} is empty")
        queries[current] = body.rstrip(";").strip()

    for line in text.splitlines():
        match = _NAME.match(line.strip())
        if match:
            flush()
            current = match.group(1)
            if current in queries:
                raise errors.ConfigError(f"query {current!r} is defined twice")
            lines = []
        elif current is not None:
            lines.append(line)
    flush()
    return queries


@functools.cache
def queries() -> dict[str, str]:
    return parse_queries((SQL_DIR / "queries.sql").read_text())


def query(name: str) -> str:
    try:
        return queries()[name]
    except KeyError:
        raise errors.ConfigError(f"no query named {name!r} in queries.sql") from None


def migrations(
    directory: pathlib.Path | None = None, *, release: str = "current"
) -> list[Migration]:
    """The migrations of `release`: sql/migrations, and for the next release sql/next too,
    numbered on from them."""
    directories = [directory or SQL_DIR / "migrations"]
    if release == "next":
        directories.append(SQL_DIR / "next")
    found: list[Migration] = []
    for path in [path for each in directories for path in sorted(each.glob("*.sql"))]:
        match = _MIGRATION.match(path.name)
        if not match:
            raise errors.ConfigError(f"migration file {path.name!r} is not named NNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text()))
    numbers = [migration.number for migration in found]
    if numbers != list(range(1, len(found) + 1)):
        raise errors.ConfigError(f"migrations must be numbered 1..n without gaps, got {numbers}")
    return found
