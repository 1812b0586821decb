"""The testcontainers provider, for machines where a Docker engine answers. Kept small."""

from __future__ import annotations

import contextlib
import typing

from harness import errors
from harness.lab.postgres import dsn, external, server

IMAGE = "postgres:15"
NO_DOCKER = "no Docker engine answers here"
PING_TIMEOUT_S = 3


def docker_engine_answers() -> bool:
    """True when a Docker engine answers a ping (the client alone is not enough)."""
    try:
        import docker

        client = docker.from_env(timeout=PING_TIMEOUT_S)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure means: no engine we can use
        return False


@contextlib.contextmanager
def provide(*, image: str = IMAGE) -> typing.Iterator[external.ExternalServer]:
    """A throwaway server in a container; it cannot be stopped and started like embedded."""
    if not docker_engine_answers():
        raise errors.EnvironmentProblem(f"testcontainers provider: {NO_DOCKER}")
    from testcontainers.community.postgres import PostgresContainer

    container = PostgresContainer(
        image,
        username=server.SUPERUSER,
        password=server.SUPERUSER,
        dbname=server.ADMIN_DATABASE,
        driver=None,
    )
    container.start()
    try:
        admin_dsn = dsn.make(
            host=container.get_container_host_ip(),
            port=int(container.get_exposed_port(5432)),
            dbname=server.ADMIN_DATABASE,
            user=server.SUPERUSER,
            password=server.SUPERUSER,
        )
        yield external.ExternalServer(admin_dsn, description="a testcontainers container")
    finally:
        container.stop()
