"""Choosing where the PostgreSQL comes from: an existing server, embedded, or a container."""

from __future__ import annotations

import contextlib
import os
import typing

from harness import errors
from harness.lab.postgres import binaries, containers, embedded, external, server

DSN_ENV = "CRASHCERT_PG_DSN"
Provider = typing.Literal["auto", "embedded", "external", "testcontainers"]


@contextlib.contextmanager
def provide(
    *, dsn: str | None = None, provider: Provider = "auto"
) -> typing.Iterator[server.Server]:
    """A PostgreSQL server for the duration of the block.

    auto: `dsn` or $CRASHCERT_PG_DSN -> that existing server; otherwise an embedded cluster;
    without local server binaries, a container where a Docker engine answers.
    """
    dsn = dsn or os.environ.get(DSN_ENV) or None
    if provider == "auto":
        provider = "external" if dsn else _local_or_container()
    if provider == "external":
        if not dsn:
            raise errors.CrashcertError(f"the external provider needs a DSN (or ${DSN_ENV})")
        yield external.open_checked(dsn)
    elif provider == "embedded":
        cluster = embedded.create()
        try:
            yield cluster
        finally:
            cluster.close()
    elif provider == "testcontainers":
        with containers.provide() as container_server:
            yield container_server
    else:
        raise errors.CrashcertError(f"unknown PostgreSQL provider {provider!r}")


def _local_or_container() -> Provider:
    try:
        binaries.find_bindir()
    except errors.EnvironmentProblem:
        if containers.docker_engine_answers():
            return "testcontainers"
        raise
    return "embedded"
