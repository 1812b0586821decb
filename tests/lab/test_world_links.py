"""A worker's links to the world services through Toxiproxy (tool_cut, model_cut, sink_cut):
proxies only for the cut services of a plan that cuts one, URLs rewritten to them, and a
black box's worker still found by the TCP peer when Toxiproxy stands in between."""

from __future__ import annotations

import os
import socket
import types
from typing import Any

from harness.faults import spec
from harness.lab import launcher as launcher_module
from harness.lab import world_links
from harness.nemesis import world_trigger

WORLD = {
    "OPENAI_BASE_URL": "http://127.0.0.1:4001/v1",
    "OPENAI_API_KEY": "crashcert",
    "CRASHCERT_TOOLS_URL": "http://127.0.0.1:4002",
    "CRASHCERT_REPLY_URL": "http://127.0.0.1:4003",
}


class FakeProxy:
    def __init__(self, name: str, upstream: str, port: int) -> None:
        self.name, self.upstream, self.listen = name, upstream, f"127.0.0.1:{port}"
        self.listen_host, self.listen_port = "127.0.0.1", port
        self.deleted = False

    def delete(self) -> None:
        self.deleted = True


class FakeToxiproxy:
    def __init__(self) -> None:
        self.made: list[FakeProxy] = []

    def create(self, name: str, upstream: str) -> FakeProxy:
        made = FakeProxy(name, upstream, 5000 + len(self.made))
        self.made.append(made)
        return made


def steps(*labels: str) -> list[spec.FaultStep]:
    return [spec.parse(label) for label in labels]


def test_no_proxy_without_a_planned_cut() -> None:
    client: Any = FakeToxiproxy()
    for plan in ([], steps("kill@tools.pending#1", "db_cut@model.pending#1")):
        assert world_links.for_plan(client, WORLD, plan, prefix="t") is None
    assert client.made == []
    # without Toxiproxy there is nothing to cut through: the nemesis records it not applied
    assert world_links.for_plan(None, WORLD, steps("tool_cut@tools.pending#1"), prefix="t") is None


def test_a_proxy_per_worker_for_each_cut_service_only() -> None:
    client: Any = FakeToxiproxy()
    plan = steps("tool_cut@tools.pending#1", "sink_cut@reply.sending#1?reset_peer=true")
    links = world_links.for_plan(client, WORLD, plan, prefix="cc_trial_x")
    assert links is not None
    env = links.env_for("x-w1")
    assert env == {"CRASHCERT_TOOLS_URL": "http://127.0.0.1:5001", "CRASHCERT_REPLY_URL":
                   "http://127.0.0.1:5000"}  # fmt: skip
    assert [(p.name, p.upstream) for p in client.made] == [
        ("cc_trial_x-x-w1-sink", "127.0.0.1:4003"),
        ("cc_trial_x-x-w1-tools", "127.0.0.1:4002"),
    ]
    assert links.env_for("x-w1") == env  # a restart under the same id keeps its proxies
    assert links.env_for("x-w2")["CRASHCERT_TOOLS_URL"] == "http://127.0.0.1:5003"
    assert links.proxy("x-w2", "tools") is client.made[3]
    assert links.proxy("x-w2", "model") is None and links.proxy(None, "tools") is None
    links.close()
    assert all(made.deleted for made in client.made)


def test_the_model_url_keeps_its_path() -> None:
    assert world_links.through(WORLD["OPENAI_BASE_URL"], "127.0.0.1", 6000) == (
        "http://127.0.0.1:6000/v1"
    )


def _launcher(links: Any, world: dict[str, str] = WORLD) -> launcher_module.Launcher:
    engine: Any = types.SimpleNamespace(worker_env=dict, lease_ms=300)
    return launcher_module.Launcher(
        engine,
        world_env=world,
        control_path=None,
        dsn_for_worker=lambda worker_id: "postgresql://127.0.0.1/x",
        log_dir=None,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        trial_id="x",
        world_links=links,
    )


def test_the_launcher_gives_each_worker_its_own_links() -> None:
    client: Any = FakeToxiproxy()
    links = world_links.for_plan(client, WORLD, steps("model_cut@model.pending#1"), prefix="p")
    launcher = _launcher(links)
    env = launcher.environment("x-w1")
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:5000/v1"
    assert env["CRASHCERT_TOOLS_URL"] == WORLD["CRASHCERT_TOOLS_URL"]  # not cut: direct
    assert launcher.world_url("x-w1", "OPENAI_BASE_URL") == "http://127.0.0.1:5000/v1"
    assert launcher.world_url("x-w9", "OPENAI_BASE_URL") == WORLD["OPENAI_BASE_URL"]
    assert _launcher(None).environment("x-w1")["OPENAI_BASE_URL"] == WORLD["OPENAI_BASE_URL"]


def test_a_black_box_worker_behind_its_proxy_is_found_by_the_proxy_port() -> None:
    """The world's peer is Toxiproxy; the worker holds a connection to its own proxy's
    listen port, which its environment names: that identifies it."""
    with (
        socket.create_server(("127.0.0.1", 0)) as service,
        socket.create_server(("127.0.0.1", 0)) as proxy_port,
    ):
        service_port, listen_port = service.getsockname()[1], proxy_port.getsockname()[1]
        with socket.create_connection(("127.0.0.1", listen_port)):
            us = types.SimpleNamespace(worker_id="x-w1", pid=os.getpid())
            given = {"CRASHCERT_TOOLS_URL": f"http://127.0.0.1:{listen_port}"}
            launcher: Any = types.SimpleNamespace(
                workers=types.SimpleNamespace(alive=lambda: [us]),
                world_url=lambda worker_id, variable: given.get(variable),
            )
            trigger = object.__new__(world_trigger.WorldTrigger)
            trigger._launcher = launcher
            trigger._ports = {world_trigger.TOOL_EFFECT: service_port}
            assert trigger._client(world_trigger.TOOL_EFFECT) is us
            given.clear()  # a direct link: the worker is not connected to the service
            assert trigger._client(world_trigger.TOOL_EFFECT) is None


def test_mcp_tools_go_through_the_tools_proxy() -> None:
    """A world that serves its tools over MCP names them by CRASHCERT_TOOLS_MCP_URL alone:
    tool_cut proxies that URL (path kept), and a black box's worker is found by it."""
    world = {key: url for key, url in WORLD.items() if key != "CRASHCERT_TOOLS_URL"}
    world["CRASHCERT_TOOLS_MCP_URL"] = "http://127.0.0.1:4004/mcp"
    client: Any = FakeToxiproxy()
    links = world_links.for_plan(client, world, steps("tool_cut@tool.started#1"), prefix="m")
    assert links is not None
    assert links.env_for("x-w1") == {"CRASHCERT_TOOLS_MCP_URL": "http://127.0.0.1:5000/mcp"}
    assert [made.upstream for made in client.made] == ["127.0.0.1:4004"]
    assert "CRASHCERT_TOOLS_URL" not in _launcher(links, world).environment("x-w1")
    variables = world_trigger.WORLD_VARIABLES[world_trigger.TOOL_EFFECT]
    assert "CRASHCERT_TOOLS_MCP_URL" in variables
