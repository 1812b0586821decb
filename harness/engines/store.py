"""An engine's own durable store, when it is not our Postgres: the server the lab starts for
each trial and the named links its workers reach it by (CONTRACT.md section 5, "Engines
with a store of their own").

    server:
      command: ["{bin}/temporal", "server", "start-dev", "--port", "{grpc}",
                "--db-filename", "{data_dir}/temporal.db", ...]
      ports: [grpc, http, ui]          # each a free loopback port, `{name}` in the command
      ready: ["{python}", "agent.py", "ready"]   # optional; else a TCP connect per link
    links:
      temporal: {env: TEMPORAL_ADDRESS, port: grpc}   # value "{host}:{port}" by default

Commands (submit, status) get each link's variable naming the server itself; every worker
gets it naming its own Toxiproxy proxy in front of the server, so a `store_cut` strikes
one worker's link alone (harness/lab/store_links.py).
"""

from __future__ import annotations

import re
from typing import Annotated

import pydantic

from harness.inputs import validation

Text = Annotated[str, pydantic.AfterValidator(validation.check_text)]
NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
# Placeholders the lab fills in a server's command, besides its port names.
RESERVED = frozenset({"python", "bin", "data_dir", "engine_dir", "host", "run_id"})
MAX_READY_S = 120.0


def _name(value: str) -> str:
    if not NAME.match(value) or value in RESERVED:
        raise ValueError(
            f"{value!r}: a name is lower-case letters, digits and _ (not {sorted(RESERVED)})"
        )
    return value


Name = Annotated[str, pydantic.AfterValidator(_name)]


class Server(pydantic.BaseModel):
    """A server the lab starts for every trial, on loopback, its data in the trial's
    directory; restarted by `server_restart`, stopped with the trial."""

    model_config = pydantic.ConfigDict(extra="forbid")

    command: list[Text] = pydantic.Field(min_length=1)
    ports: list[Name] = pydantic.Field(min_length=1)
    # A command that exits 0 once the server answers (retried until ready_timeout_s).
    ready: list[Text] | None = None
    ready_timeout_s: float = pydantic.Field(default=30.0, gt=0, le=MAX_READY_S)
    env: dict[Text, Text] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("ports")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("ports named twice")
        return value


class Link(pydantic.BaseModel):
    """A named link from the workers to the store: the variable that names it, the port of
    the server it leads to, and how its value is written."""

    model_config = pydantic.ConfigDict(extra="forbid")

    env: Text
    port: Name
    # `{host}` and `{port}` are filled: the server's own, or the worker's proxy's.
    value: Text = "{host}:{port}"


def check(server: Server | None, links: dict[str, Link]) -> None:
    """Links need a server, and each leads to a port it names (ValueError says which not)."""
    if links and server is None:
        raise ValueError("links need a server: name the server command that serves them")
    ports = server.ports if server is not None else []
    unknown = {name: link.port for name, link in links.items() if link.port not in ports}
    if unknown:
        raise ValueError(f"links lead to ports the server does not name: {unknown}")
    for name in links:
        _name(name)


def link_name(links: dict[str, Link], wanted: str | None) -> str | None:
    """The link a fault names (`link=temporal`), or the only one when it names none."""
    if wanted is None:
        return next(iter(links)) if len(links) == 1 else None
    return wanted if wanted in links else None
