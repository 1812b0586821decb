"""Faults on a worker's links, through its own Toxiproxy proxies: the database link (cut,
a held COMMIT either way, latency) and the links to the world's services (cut, slowed,
reset)."""

from __future__ import annotations

import logging
from typing import Any

from harness import errors
from harness.faults import spec
from harness.lab import postgres
from harness.nemesis import strike as strike_module

log = logging.getLogger(__name__)


def _database_proxy(strike: strike_module.Strike) -> Any:
    proxies = strike.parts.proxies
    proxy = None if proxies is None else proxies.by_worker.get(strike.hit.worker_id or "")
    if proxy is None:
        raise strike_module.NotApplied("no Toxiproxy proxy")
    return proxy


def _healed(strike: strike_module.Strike, heal: strike_module.Heal) -> strike_module.Heal:
    def run() -> None:
        heal()
        strike.record("heal", ok=True, note=f"healed {strike.step.action}")

    return run


class DbCut(strike_module.Kind):
    """Disable the worker's proxy: connections die, none open; heal: enable."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        proxy = _database_proxy(strike)
        proxy.disable()
        strike.record(strike.step.action, ok=True, note=f"proxy {proxy.name}")
        return _healed(strike, proxy.enable)


class Latency(strike_module.Kind):
    """Latency far beyond the lease on the worker's database link; heal: remove the toxic."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        proxy = _database_proxy(strike)
        latency_ms = int(strike.step.params.get("latency_ms", 3 * strike.parts.lease_s * 1000))
        toxic = proxy.add_toxic("latency", stream="downstream", attributes={"latency": latency_ms})
        strike.record(strike.step.action, ok=True, note=f"proxy {proxy.name}")
        return _healed(strike, lambda: proxy.remove_toxic(toxic))


class HeldCommit(strike_module.Kind):
    """Swallow one direction's bytes at a `:before_commit` point: server->engine
    (commit_lost: COMMIT lands, its ack never does) or engine->server (commit_dropped:
    COMMIT never arrives). The heal cuts the hung connections and removes the toxic; its
    record says what really became of the held transaction, read from Postgres by xid."""

    def __init__(self, stream: str) -> None:
        self.stream = stream

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        proxy = _database_proxy(strike)
        # The held worker's open transaction, noted before its COMMIT can be sent.
        xids = _in_flight(strike.parts.dsn)
        # timeout=0: bytes are swallowed and the connection stays open until healed.
        toxic = proxy.add_toxic("timeout", stream=self.stream, attributes={"timeout": 0})
        strike.record(
            strike.step.action, ok=True, note=f"proxy {proxy.name}", observed={"xids": xids}
        )

        def heal() -> None:
            proxy.disable()  # the engine's hung connection finally errors out
            proxy.remove_toxic(toxic)
            proxy.enable()
            # The cut settles the transaction: committed or rolled back, never both,
            # whatever the engine concludes.
            outcome, why = _fate(strike.parts.dsn, xids)
            note = f"healed {strike.step.action}; the held transaction {outcome.upper()} ({why})"
            strike.record(
                "heal", ok=True, note=note, observed={"transaction": outcome, "xids": xids}
            )

        return heal


class WorldLink(strike_module.Kind):
    """The worker's own proxy in front of one world service (harness/lab/world_links.py):
    cut by default, slowed with `latency_ms`, every connection reset with `reset_peer`."""

    def __init__(self, service: str) -> None:
        self.service = service

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        links = strike.parts.world_links
        proxy = None if links is None else links.proxy(strike.hit.worker_id, self.service)
        if proxy is None:
            raise strike_module.NotApplied("no Toxiproxy proxy")
        params = strike.step.params
        if params.get("reset_peer"):
            # timeout=0: each connection is reset at once, in both directions' stead.
            toxic = proxy.add_toxic("reset_peer", stream="upstream", attributes={"timeout": 0})
            heal = lambda: proxy.remove_toxic(toxic)  # noqa: E731
        elif "latency_ms" in params:
            toxic = proxy.add_toxic(
                "latency", stream="downstream", attributes={"latency": params["latency_ms"]}
            )
            heal = lambda: proxy.remove_toxic(toxic)  # noqa: E731
        else:
            proxy.disable()
            heal = proxy.enable
        strike.record(strike.step.action, ok=True, note=f"proxy {proxy.name}")
        return _healed(strike, heal)


def _in_flight(dsn: str | None) -> list[int]:
    if dsn is None:
        return []
    try:
        return postgres.xact.in_flight(dsn)
    except errors.CrashcertError as error:
        log.warning("%s", error)
        return []


def _fate(dsn: str | None, xids: list[int]) -> tuple[str, str]:
    if dsn is None:
        return postgres.xact.UNKNOWN, "no database to ask"
    return postgres.xact.fate(dsn, xids)


def world_links() -> dict[str, WorldLink]:
    """One kind per world-link class of the catalog (tool_cut, model_cut, sink_cut)."""
    return {name: WorldLink(service) for name, service in spec.LINKS.items()}
