"""Responses the world loses on purpose (harness/world/http.py lose_response): a reset, a
hang until the client gives up, and a stream of server-sent events cut after K chunks,
each after the handler's effect is recorded; and streaming as the official client reads it."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from harness.lab import processes
from harness.world import hooks as hooks_module
from harness.world import http
from harness.world import world as world_module
from tests import fix_world

MESSAGES = [
    {"role": "system", "content": "You are a careful support agent."},
    {"role": "user", "content": f"Refund order 42. {world_module.run_marker('run-1')}"},
]


class Effects:
    """A one-route server whose handler records an effect, then loses its answer."""

    def __init__(self, fate: http.Fate | None) -> None:
        self.fate = fate
        self.applied = 0
        self.lost: list[bool] = []
        self.server = http.JsonServer("effects", [http.Route("POST", "/do", self._do)])

    def _do(self, request: http.Request) -> http.Response:
        self.applied += 1
        if self.fate is not None:
            self.lost.append(http.lose_response(self.fate))
        return http.Response(200, {"done": True})


@pytest.fixture
def effects() -> Any:
    made: list[Effects] = []

    def make(fate: http.Fate | None) -> Effects:
        made.append(Effects(fate))
        made[-1].server.start()
        return made[-1]

    yield make
    for one in made:
        one.server.stop()


def _post(url: str, *, timeout: float = 5.0) -> Any:
    request = urllib.request.Request(url, data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def test_without_a_fate_the_answer_arrives(effects: Any) -> None:
    served = effects(None)
    assert _post(f"{served.server.url}/do") == {"done": True}
    assert not http.lose_response(http.Fate("reset"))  # no request served by this thread


def test_a_reset_loses_the_answer_after_the_effect(effects: Any) -> None:
    served = effects(http.Fate("reset"))
    with pytest.raises((ConnectionResetError, urllib.error.URLError)) as raised:
        _post(f"{served.server.url}/do")
    reason = getattr(raised.value, "reason", raised.value)
    assert isinstance(reason, ConnectionResetError), reason
    assert served.applied == 1 and served.lost == [True]
    # The server serves on: the next request (its answer lost too) is applied as well.
    with pytest.raises((ConnectionResetError, urllib.error.URLError)):
        _post(f"{served.server.url}/do")
    assert served.applied == 2


def test_a_hang_holds_until_the_client_gives_up(effects: Any) -> None:
    served = effects(http.Fate("hang"))
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        _post(f"{served.server.url}/do", timeout=0.3)
    assert served.applied == 1
    # The client closed its end: the held thread notices and lets go of the connection.
    assert processes.wait_until(lambda: not served.server._connections, timeout=10)


def test_a_hang_ends_when_the_world_stops(effects: Any) -> None:
    served = effects(http.Fate("hang"))
    client = socket.create_connection(("127.0.0.1", served.server.port))
    client.sendall(b"POST /do HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    assert processes.wait_until(lambda: served.applied == 1, timeout=10)
    held = [t for t in threading.enumerate() if t.name.endswith("(process_request_thread)")]
    served.server.stop()
    assert processes.wait_until(lambda: not any(t.is_alive() for t in held), timeout=10)
    client.settimeout(5)
    try:
        assert client.recv(100) == b""  # no answer ever came
    except ConnectionResetError:
        pass
    finally:
        client.close()


def _client(world: world_module.World) -> Any:  # Any: the SDK's overloads want typed params
    return openai.OpenAI(base_url=world.model_url, api_key="x", max_retries=0, timeout=5)


def _assemble(chunks: list[Any]) -> tuple[dict[int, dict[str, str]], str | None, Any]:
    """Tool calls, finish reason and usage from a stream, as an engine assembles them."""
    calls: dict[int, dict[str, str]] = {}
    finish, usage = None, None
    for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return calls, finish, usage


def test_a_stream_is_read_by_the_official_client(world: world_module.World) -> None:
    client = _client(world)
    whole = client.chat.completions.create(model="m", messages=MESSAGES)
    streamed = client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(streamed)
    calls, finish, usage = _assemble(chunks)
    expected = whole.choices[0].message.tool_calls or []
    assert [(c["id"], c["name"], c["arguments"]) for c in calls.values()] == [
        (call.id, call.function.name, call.function.arguments) for call in expected
    ]
    assert finish == "tool_calls" and usage is not None
    assert usage.total_tokens == whole.usage.total_tokens
    assert chunks[-1].choices == []  # the usage chunk comes last, with no choice
    entries = world.model.entries()
    assert [entry.stream for entry in entries] == [False, True]


def test_no_usage_chunk_unless_asked(world: world_module.World) -> None:
    chunks = list(
        _client(world).chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
        )
    )
    assert _assemble(chunks)[1] == "tool_calls"
    assert all(chunk.usage is None for chunk in chunks)


@pytest.mark.parametrize("after", [0, 2, 10_000])
def test_a_cut_stream_just_stops_before_its_end(
    make_world: fix_world.MakeWorld, after: int
) -> None:
    hooks = hooks_module.WorldHooks()
    hooks.model_answered = lambda entry: (http.lose_response(http.Fate("cut", after)), None)[1]
    world = make_world(hooks=hooks)
    chunks = list(
        _client(world).chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )  # no error: the body ends cleanly, only shorter
    _, finish, usage = _assemble(chunks)
    assert usage is None  # the last chunk never leaves
    if after < 10_000:
        assert len(chunks) == after and finish is None
    assert world.model.entries()[0].status_code == 200  # answered (and billed) all the same
