"""Fixtures for the simulated world: started worlds (stopped at teardown) and plain HTTP."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from harness.scenario import schema
from harness.world import hooks as hooks_module
from harness.world import world as world_module

# The smallest useful script: one refund tool call, then the final reply.
REFUND_SCENARIO: dict[str, Any] = {
    "name": "world-refund",
    "input": {"user": "Refund order 42."},
    "tools": [
        {
            "name": "refund",
            "replay": "non_replayable",
            "effect": "write",
            "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
            "behaviour": {"result": {"refund_id": "rf-1"}},
        }
    ],
    "turns": [
        {
            "tool_calls": [{"id": "call_1", "name": "refund", "arguments": {"order": "{run}-42"}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 7},
        },
        {
            "content": "Refunded order 42 for {run}.",
            "usage": {"prompt_tokens": 80, "completion_tokens": 9},
        },
    ],
}

POLL_S = 0.01

MakeWorld = Callable[..., world_module.World]


@pytest.fixture
def make_world() -> Iterator[MakeWorld]:
    """Build and start a World from a scenario (dict or Scenario); all stop at teardown."""
    worlds: list[world_module.World] = []

    def make(
        scenario: Mapping[str, Any] | schema.Scenario = REFUND_SCENARIO,
        *,
        hooks: hooks_module.WorldHooks | None = None,
    ) -> world_module.World:
        if not isinstance(scenario, schema.Scenario):
            scenario = schema.parse(dict(scenario), source="test scenario")
        world = world_module.World(scenario, hooks=hooks)
        world.start()
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        world.stop()


@pytest.fixture
def world(make_world: MakeWorld) -> world_module.World:
    """A started world on the refund scenario."""
    return make_world()


@dataclasses.dataclass(frozen=True)
class JsonReply:
    status: int
    body: Any
    headers: Mapping[str, str]


class JsonClient:
    """Plain HTTP with urllib: any status comes back as a JsonReply, never as an exception."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout

    def get(self, url: str, *, timeout: float | None = None) -> JsonReply:
        return self.request("GET", url, timeout=timeout)

    def post(
        self,
        url: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> JsonReply:
        data = raw if raw is not None else json.dumps(body).encode()
        return self.request("POST", url, data=data, headers=headers, timeout=timeout)

    def request(
        self,
        method: str,
        url: str,
        *,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> JsonReply:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return JsonReply(response.status, json.load(response), dict(response.headers))
        except urllib.error.HTTPError as error:
            with error:
                return JsonReply(error.code, json.load(error), dict(error.headers))


@pytest.fixture
def http_json() -> JsonClient:
    return JsonClient()


def wait_for(condition: Callable[[], Any], *, timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll until `condition()` is truthy and return it; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_S)  # between polls of the condition, bounded by the deadline
