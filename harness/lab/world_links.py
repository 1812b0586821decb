"""A worker's links to the world services through Toxiproxy, for `tool_cut`, `model_cut`
and `sink_cut` (harness/faults/spec.py).

Made only for a trial whose plan cuts a link, and only for the services it cuts: every
other trial's workers keep their direct links (a proxy costs a round trip to Toxiproxy per
worker and a hop per request). Each worker gets its own proxy per service, so a cut hits
one worker alone, like its database link (harness/lab/database_links.py).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping

from harness.faults import spec
from harness.lab import proxy as proxy_module

# The variables of the engine contract (CONTRACT section 1) that name each service. The
# tools have two transports and a world gives one (CRASHCERT_TOOLS_MCP_URL for a scenario
# with `tools_transport: mcp`): whichever it gives goes through the proxy, which relays
# TCP and so carries MCP's Streamable HTTP as it carries plain HTTP.
ENV = {
    "model": ("OPENAI_BASE_URL",),
    "tools": ("CRASHCERT_TOOLS_URL", "CRASHCERT_TOOLS_MCP_URL"),
    "sink": ("CRASHCERT_REPLY_URL",),
}


def services(plan: Iterable[spec.FaultStep]) -> frozenset[str]:
    """The world services whose links the plan breaks."""
    return frozenset(spec.LINKS[step.action] for step in plan if step.action in spec.LINKS)


def for_plan(
    client: proxy_module.Toxiproxy | None,
    world_env: Mapping[str, str],
    plan: Iterable[spec.FaultStep],
    *,
    prefix: str,
) -> WorldLinks | None:
    """The links a trial needs: None when its plan cuts none, or without Toxiproxy (the
    nemesis then records the fault as not applied: the trial is INCONCLUSIVE)."""
    cut = services(plan)
    if not cut or client is None:
        return None
    return WorldLinks(client, world_env, cut, prefix=prefix)


def through(url: str, listen_host: str, listen_port: int) -> str:
    """The same URL (scheme, path) with its host and port replaced by the proxy's."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{listen_host}:{listen_port}"))


class WorldLinks:
    def __init__(
        self,
        client: proxy_module.Toxiproxy,
        world_env: Mapping[str, str],
        services: frozenset[str],
        *,
        prefix: str,
    ) -> None:
        self._client = client
        self._world_env = dict(world_env)
        self._services = sorted(services)
        self._prefix = prefix
        self._proxies: dict[tuple[str, str], proxy_module.Proxy] = {}

    def env_for(self, worker_id: str) -> dict[str, str]:
        """The worker's world variables, each cut service's URL through the worker's own
        proxy (made on first use; a restart under the same id reuses it)."""
        env: dict[str, str] = {}
        for service in self._services:
            variable = next((name for name in ENV[service] if name in self._world_env), None)
            if variable is None:
                continue  # the world does not serve it (no tools): nothing to cut
            url = self._world_env[variable]
            made = self._proxies.get((worker_id, service))
            if made is None:
                parts = urllib.parse.urlsplit(url)
                made = self._client.create(
                    f"{self._prefix}-{worker_id}-{service}",
                    upstream=f"{parts.hostname}:{parts.port}",
                )
                self._proxies[(worker_id, service)] = made
            env[variable] = through(url, made.listen_host, made.listen_port)
        return env

    def proxy(self, worker_id: str | None, service: str) -> proxy_module.Proxy | None:
        return self._proxies.get((worker_id or "", service))

    def all(self) -> list[proxy_module.Proxy]:
        return list(self._proxies.values())

    def close(self) -> None:
        """Delete the proxies (each one already gone is fine)."""
        for made in self._proxies.values():
            made.delete()
