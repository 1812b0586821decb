"""Faults on an engine's own store (harness/lab/store_links.py): the worker's link to it
cut, slowed, reset or its responses lost (`store_cut`, `store_response_lost`), and the
server itself killed and started again (`server_restart`)."""

from __future__ import annotations

from typing import Any

from harness.engines import store as store_module
from harness.nemesis import strike as strike_module


def _store_proxy(strike: strike_module.Strike) -> Any:
    store = strike.parts.store_links
    if store is None:
        raise strike_module.NotApplied("the engine names no store link (links: in its description)")
    wanted = strike.step.params.get("link")
    name = store_module.link_name(store.server.links, None if wanted is None else str(wanted))
    if name is None:
        raise strike_module.NotApplied(
            f"no store link {wanted!r}; the engine's: {', '.join(store.server.links)}"
            if wanted is not None
            else f"the engine has several store links: name one (link=...): "
            f"{', '.join(store.server.links)}"
        )
    proxy = store.proxy(strike.hit.worker_id, name)
    if proxy is None:
        raise strike_module.NotApplied("no Toxiproxy proxy on the store link")
    return proxy


def _healed(strike: strike_module.Strike, heal: strike_module.Heal) -> strike_module.Heal:
    def run() -> None:
        heal()
        strike.record("heal", ok=True, note=f"healed {strike.step.action}")

    return run


class StoreCut(strike_module.Kind):
    """The worker's own proxy in front of its store: cut by default, slowed with
    `latency_ms`, every connection reset with `reset_peer`; heal later."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        proxy = _store_proxy(strike)
        params = strike.step.params
        if params.get("reset_peer"):
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


class StoreResponseLost(strike_module.Kind):
    """Swallow the store's responses to the worker (server -> worker) from the point on:
    what the worker sends still lands (a completion call reaches the server), its answer
    never arrives. The heal cuts the hung connections, then opens the link again."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        proxy = _store_proxy(strike)
        toxic = proxy.add_toxic("timeout", stream="downstream", attributes={"timeout": 0})
        strike.record(strike.step.action, ok=True, note=f"proxy {proxy.name}")

        def heal() -> None:
            proxy.disable()
            proxy.remove_toxic(toxic)
            proxy.enable()

        return _healed(strike, heal)


class ServerRestart(strike_module.Kind):
    """SIGKILL the engine's store server (its data stays); heal: start it, ready again."""

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        store = strike.parts.store_links
        if store is None:
            raise strike_module.NotApplied(
                "the engine names no server (server: in its description)"
            )
        store.server.kill()
        strike.record("server_restart", ok=True, note="SIGKILL to the engine's store server")

        def heal() -> None:
            store.server.start()
            strike.record("server_start", ok=True, note="the store server is ready again")

        return heal
