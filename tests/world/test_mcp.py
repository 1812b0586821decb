"""The world's tools over MCP: a real `mcp` client against harness/world/mcp.py, and the
ledger it leaves compared with the one HTTP leaves for the same calls."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'crashcert[mcp]')")

import mcp
from mcp.client import streamable_http

from harness import errors
from harness.lab import processes
from harness.scenario import schema
from harness.world import hooks as hooks_module
from harness.world import http, ledger
from harness.world import mcp as world_mcp
from harness.world import world as world_module
from reference_engine import mcp_tools, services
from tests import fix_world

T = TypeVar("T")


def _scenario(transport: str, **tools: dict[str, Any]) -> dict[str, Any]:
    specs = [
        {"name": name, "replay": "non_replayable", "effect": "write", **fields}
        for name, fields in tools.items()
    ]
    calls = [{"id": f"call_{name}", "name": name} for name in tools]
    return {
        "name": "world-tools-mcp",
        "input": {"user": "go"},
        "tools_transport": transport,
        "tools": specs,
        "turns": [{"tool_calls": calls}, {"content": "done"}],
    }


def _session(
    world: world_module.World, operation: Callable[[mcp.ClientSession], Awaitable[T]]
) -> T:
    async def run() -> T:
        assert world.tools_mcp_url is not None
        async with (
            streamable_http.streamable_http_client(world.tools_mcp_url) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await operation(session)

    return asyncio.run(run())


def _call(world: world_module.World, tool: str, arguments: Any, key: str | None) -> Any:
    async def call(session: mcp.ClientSession) -> Any:
        meta: Any = {world_mcp.KEY_META: key} if key else None
        result = await session.call_tool(tool, arguments, meta=meta)
        assert result.is_error == (result.structured_content["status"] != 200)
        assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        return result.structured_content

    return _session(world, call)


def _shape(entries: list[ledger.ToolEntry]) -> list[dict[str, Any]]:
    """Entries without their times (seq stays: both worlds start counting at 1)."""
    return [entry.model_dump(exclude={"t"}) for entry in entries]


def test_lists_each_tool_with_its_declaration_and_policy(
    make_world: fix_world.MakeWorld,
) -> None:
    world = make_world(
        _scenario(
            "mcp", refund={"queryable": True}, lookup={"effect": "read", "replay": "replayable"}
        )
    )

    listed = _session(world, lambda session: session.list_tools())

    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == ["lookup", "refund"]
    for name, tool in tools.items():
        # the engine rebuilds the HTTP declaration, fingerprint and all
        assert mcp_tools.declaration(tool) == world.scenario.tool(name).declaration()
    assert tools["lookup"].annotations is not None
    assert tools["lookup"].annotations.read_only_hint is True
    assert tools["refund"].input_schema == {"type": "object", "properties": {}}


def test_the_meta_key_makes_one_effect_and_a_replay_answers_the_recorded_result(
    make_world: fix_world.MakeWorld,
) -> None:
    world = make_world(
        _scenario("mcp", refund={"honours_idempotency_key": True, "behaviour": {"result": 7}})
    )

    first = _call(world, "refund", {"order": "o1"}, "k1")
    again = _call(world, "refund", {"order": "o1"}, "k1")

    assert first == again == {"status": 200, "result": 7}
    snapshot = world.snapshot()
    assert [e.key for e in snapshot.tool_effects()] == ["k1"]
    assert [(r.key, r.outcome, r.result) for r in snapshot.tool_requests()] == [
        ("k1", "ok", 7),
        ("k1", "deduplicated", 7),
    ]


def test_a_key_outside_meta_is_no_key(make_world: fix_world.MakeWorld) -> None:
    world = make_world(_scenario("mcp", refund={"honours_idempotency_key": True}))

    _call(world, "refund", {"order": "o1", "idempotency_key": "k1"}, None)
    _call(world, "refund", {"order": "o1", "idempotency_key": "k1"}, None)

    assert [e.key for e in world.snapshot().tool_effects()] == [None, None]


def test_the_ledger_is_the_one_http_leaves(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    """Scripted 503, 500-after-effect, success, replay by key and queries: same entries."""
    tools: dict[str, dict[str, Any]] = {
        "refund": {
            "queryable": True,
            "honours_idempotency_key": True,
            "behaviour": {"fail_first": 1, "effect_then_fail": 1, "result": {"id": "rf-1"}},
            "redeploy": {"after_requests": 2, "version": "2"},
        },
        "lookup": {"effect": "read", "replay": "replayable"},
    }
    over_http = make_world(_scenario("http", **tools))
    over_mcp = make_world(_scenario("mcp", **tools))
    calls = [("refund", {"o": 1}, "k1")] * 3 + [("refund", {"o": 1}, "k2"), ("lookup", {}, "k3")]
    queries = [("refund", "k1"), ("refund", "nope"), ("lookup", "k3")]

    http_answers: list[dict[str, Any]] = []
    for tool, arguments, key in calls:
        reply = http_json.post(
            f"{over_http.tools_url}/tools/{tool}", arguments, headers={"Idempotency-Key": key}
        )
        http_answers.append({"status": reply.status, **reply.body})
    for tool, key in queries:
        reply = http_json.get(f"{over_http.tools_url}/tools/{tool}/effects/{key}")
        http_answers.append({"status": reply.status, **reply.body})
    client = mcp_tools.McpTools(over_mcp.tools_mcp_url or "", timeout_s=10)
    mcp_answers = [_call(over_mcp, tool, arguments, key) for tool, arguments, key in calls]
    for tool, key in queries:
        queried = client.query(tool, key)
        mcp_answers.append({"status": queried.status_code, **queried.body})

    assert mcp_answers == http_answers
    assert [a["status"] for a in mcp_answers] == [503, 500, 200, 200, 200, 200, 404, 405]
    assert mcp_answers[0]["applied"] is False and mcp_answers[1]["applied"] is None
    assert _shape(over_mcp.snapshot().tools) == _shape(over_http.snapshot().tools)
    assert any(isinstance(e, ledger.ToolRedeploy) for e in over_mcp.snapshot().tools)
    listed = client.list()
    assert listed.body["tools"] == http_json.get(f"{over_http.tools_url}/tools").body["tools"]


def test_the_effect_hook_fires_before_the_answer_leaves(
    make_world: fix_world.MakeWorld,
) -> None:
    seen: list[tuple[str, int]] = []

    def hook(entry: ledger.ToolEffect) -> None:
        seen.append((entry.tool, len(world.snapshot().tool_effects())))

    hooks = hooks_module.WorldHooks(tool_effect_applied=hook)
    world = make_world(_scenario("mcp", refund={}), hooks=hooks)

    _call(world, "refund", {}, "k1")

    assert seen == [("refund", 1)]


def test_the_engine_client_speaks_the_http_replies(make_world: fix_world.MakeWorld) -> None:
    world = make_world(_scenario("mcp", refund={"queryable": True, "behaviour": {"result": 1}}))
    client = mcp_tools.McpTools(world.tools_mcp_url or "", timeout_s=10)

    assert client.query("refund", "a/b c").status_code == 404
    answered = client.call("refund", b'{"o": 1}', "a/b c")
    found = client.query("refund", "a/b c")
    refused = client.call("refund", b"[1]", "k2")

    assert (answered.status_code, answered.body) == (200, {"result": 1})
    assert (found.status_code, found.body) == (200, {"applied": True, "result": 1})
    assert refused.status_code == 400  # not sent: MCP arguments are an object
    assert [e.key for e in world.snapshot().tool_requests()] == ["a/b c"]


def test_nothing_listening_is_not_sent() -> None:
    """A refused connection fails in the handshake: the call itself never left."""
    world = world_module.World(schema.parse(_scenario("mcp", refund={}), source="t"))
    world.start()
    url = world.tools_mcp_url or ""
    world.stop()

    with pytest.raises(services.NotSent):
        mcp_tools.McpTools(url, timeout_s=5).call("refund", b"{}", "k1")


def test_only_the_chosen_transport_is_offered_and_stop_leaves_no_thread() -> None:
    before = {thread.ident for thread in threading.enumerate()}
    scenario = schema.parse(_scenario("mcp", refund={}), source="t")
    with world_module.World(scenario) as world:
        env = world.env()
        _call(world, "refund", {}, "k1")
        assert world.tools_endpoint == world.tools_mcp_url

    assert env["CRASHCERT_TOOLS_MCP_URL"].startswith("http://127.0.0.1:")
    assert env["CRASHCERT_TOOLS_MCP_URL"].endswith("/mcp")
    assert "CRASHCERT_TOOLS_URL" not in env
    assert {thread.ident for thread in threading.enumerate()} <= before


def test_a_hung_call_ends_with_the_world_and_leaves_no_thread() -> None:
    before = {thread.ident for thread in threading.enumerate()}
    scenario = schema.parse(_scenario("mcp", refund={"behaviour": {"hang": True}}), source="t")
    world = world_module.World(scenario)
    world.start()
    client = mcp_tools.McpTools(world.tools_mcp_url or "", timeout_s=60)
    raised: list[BaseException] = []

    def call() -> None:
        try:
            client.call("refund", b"{}", "k1")
        except BaseException as error:
            raised.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert processes.wait_until(lambda: world.snapshot().tool_requests(), timeout=30)
    finally:
        world.stop()
    caller.join(30)

    assert not caller.is_alive()
    assert [type(error) for error in raised] == [services.NoAnswer]  # it may have been applied
    assert [(r.status_code, r.outcome) for r in world.snapshot().tool_requests()] == [(0, "hung")]
    assert world.snapshot().tool_effects() == []
    assert {thread.ident for thread in threading.enumerate()} <= before


def test_http_is_the_default_and_an_unknown_transport_is_refused(
    make_world: fix_world.MakeWorld,
) -> None:
    world = make_world(_scenario("http", refund={}))
    raw = _scenario("http", refund={})
    del raw["tools_transport"]

    assert schema.parse(raw, source="t").tools_transport == "http"
    assert world.tools_mcp is None and world.tools_endpoint == world.tools_url
    assert "CRASHCERT_TOOLS_MCP_URL" not in world.env()
    with pytest.raises(errors.CrashcertError, match="tools_transport"):
        schema.parse(_scenario("grpc", refund={}), source="t")


def _losing_world(
    make_world: fix_world.MakeWorld, fate: http.Fate
) -> tuple[world_module.World, list[bool]]:
    """A world whose effect hook has the first tools/call answer meet `fate`, as
    response_lost does (harness/nemesis/world_trigger.py), and whether the world could."""
    lost: list[bool] = []

    def hook(entry: ledger.ToolEffect) -> None:
        if not lost:
            lost.append(http.lose_response(fate))

    hooks = hooks_module.WorldHooks(tool_effect_applied=hook)
    world = make_world(_scenario("mcp", refund={"behaviour": {"result": 1}}), hooks=hooks)
    return world, lost


def test_a_lost_response_is_reset_after_the_effect(make_world: fix_world.MakeWorld) -> None:
    """response_lost over MCP: the effect is recorded, the connection is reset before any
    answer leaves, and the engine's client reads no answer (it may have been applied)."""
    world, lost = _losing_world(make_world, http.Fate("reset"))
    client = mcp_tools.McpTools(world.tools_mcp_url or "", timeout_s=10)

    with pytest.raises(services.NoAnswer):
        client.call("refund", b"{}", "k1")

    assert lost == [True]
    assert [e.key for e in world.snapshot().tool_effects()] == ["k1"]
    assert client.call("refund", b"{}", "k2").status_code == 200  # the server serves on


def test_a_hung_lost_response_waits_for_the_client_to_give_up(
    make_world: fix_world.MakeWorld,
) -> None:
    world, lost = _losing_world(make_world, http.Fate("hang"))
    client = mcp_tools.McpTools(world.tools_mcp_url or "", timeout_s=0.5)

    started = time.monotonic()
    with pytest.raises(services.NoAnswer):
        client.call("refund", b"{}", "k1")

    assert time.monotonic() - started >= 0.5  # held until the client's own timeout
    assert lost == [True]
    assert [e.key for e in world.snapshot().tool_effects()] == ["k1"]
