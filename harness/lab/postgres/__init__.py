"""PostgreSQL for the harness: provide a server, clone template databases, crash and restart.

    from harness.lab import postgres
    with postgres.provide() as server:          # embedded, or $CRASHCERT_PG_DSN
        postgres.templates.ensure_template(server, "tpl_v1", migrate)
        dsn = postgres.templates.clone(server, "tpl_v1", "trial_1")

The only part of the harness that touches psycopg (besides the engine's own store layer).
"""

from __future__ import annotations

from harness.lab.postgres import (
    accounts,
    admin,
    binaries,
    containers,
    dsn,
    embedded,
    external,
    markers,
    provider,
    recycle,
    server,
    spares,
    standby,
    templates,
    xact,
)

provide = provider.provide
Server = server.Server

__all__ = [
    "Server",
    "accounts",
    "admin",
    "binaries",
    "containers",
    "dsn",
    "embedded",
    "external",
    "markers",
    "provide",
    "provider",
    "recycle",
    "server",
    "spares",
    "standby",
    "templates",
    "xact",
]
