"""The reference engine's tool retry rules hold over MCP as over HTTP (reference_engine
services.py with mcp_tools.py), against a real world serving its tools over MCP."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'crashcert[mcp]')")

from reference_engine import services
from tests import fix_world


def _services(world: Any) -> services.Services:
    return services.Services(
        tools_url=None,
        tools_mcp_url=world.tools_mcp_url,
        reply_url=None,
        timeout_s=10.0,
        backoff=services.Backoff(first_ms=1, max_ms=1, limit=3),
    )


def _world(make_world: fix_world.MakeWorld, **refund: Any) -> Any:
    return make_world(
        {
            "name": "engine-mcp",
            "input": {"user": "go"},
            "tools_transport": "mcp",
            "tools": [{"name": "refund", "replay": "non_replayable", "effect": "write", **refund}],
            "turns": [{"tool_calls": [{"id": "c1", "name": "refund"}]}, {"content": "done"}],
        }
    )


def test_a_503_is_retried_under_the_same_key(make_world: fix_world.MakeWorld) -> None:
    world = _world(make_world, behaviour={"fail_first": 2, "result": "ok"})
    tools = _services(world)
    declaration = tools.declarations()["refund"]

    result = tools.run_tool("refund", '{"o": 1}', "k1", declaration)

    assert (result.state, result.outcome) == ("succeeded", {"result": "ok"})
    requests = world.snapshot().tool_requests()
    assert [(r.status_code, r.key) for r in requests] == [(503, "k1"), (503, "k1"), (200, "k1")]


def test_an_unknown_outcome_is_asked_by_key_never_resent(
    make_world: fix_world.MakeWorld,
) -> None:
    world = _world(make_world, queryable=True, behaviour={"effect_then_fail": 1, "result": 5})
    tools = _services(world)
    declaration = tools.declarations()["refund"]
    assert declaration == world.scenario.tool("refund").declaration()

    result = tools.run_tool("refund", "{}", "k1", declaration)

    assert result.state == "succeeded"
    assert result.outcome == {"result": 5, "queried": True}
    snapshot = world.snapshot()
    assert len(snapshot.tool_effects()) == 1
    assert [(q.key, q.found) for q in snapshot.tool_queries()] == [("k1", True)]
