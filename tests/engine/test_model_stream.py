"""The reference engine's streaming mode (reference_engine/model_client.py) against the
world's scripted model: the same answer as without streaming; a cut stream is a failed
call, retried, never an answer."""

from __future__ import annotations

import pytest

from harness.world import hooks as hooks_module
from harness.world import http, ledger
from harness.world import world as world_module
from reference_engine import errors, model_client
from tests import fix_world

MESSAGES = [
    {"role": "system", "content": "You are a careful support agent."},
    {"role": "user", "content": f"Refund order 42. {world_module.run_marker('run-1')}"},
]


def _client(
    world: world_module.World, *, stream: bool, retries: int = 1
) -> model_client.ModelClient:
    return model_client.ModelClient(
        base_url=world.model_url,
        api_key="x",
        model="m",
        timeout_s=5,
        delays=[0.0] * retries,
        stream=stream,
    )


def test_a_streamed_answer_is_the_whole_answer(world: world_module.World) -> None:
    whole = _client(world, stream=False).complete(MESSAGES, [])
    streamed = _client(world, stream=True).complete(MESSAGES, [])
    assert streamed.message == whole.message and streamed.message.get("tool_calls")
    assert streamed.usage == whole.usage and streamed.usage["total_tokens"] > 0
    assert [entry.stream for entry in world.model.entries()] == [False, True]


def _cut_first(after: int) -> hooks_module.WorldHooks:
    hooks = hooks_module.WorldHooks()
    seen: list[ledger.ModelRequest] = []

    def cut(entry: ledger.ModelRequest) -> None:
        seen.append(entry)
        if len(seen) == 1:
            http.lose_response(http.Fate("cut", after))

    hooks.model_answered = cut
    return hooks


@pytest.mark.parametrize("after", [0, 3, 10_000])
def test_a_cut_stream_is_retried_never_used(make_world: fix_world.MakeWorld, after: int) -> None:
    world = make_world(hooks=_cut_first(after))
    answer = _client(world, stream=True).complete(MESSAGES, [])
    expected = _client(make_world(), stream=False).complete(MESSAGES, [])
    assert answer.message == expected.message  # the second, whole answer
    assert [entry.status_code for entry in world.model.entries()] == [200, 200]  # two billed


def test_cut_streams_only_end_in_model_unavailable(make_world: fix_world.MakeWorld) -> None:
    hooks = hooks_module.WorldHooks()
    hooks.model_answered = lambda entry: (http.lose_response(http.Fate("cut", 2)), None)[1]
    world = make_world(hooks=hooks)
    with pytest.raises(errors.ModelUnavailable, match="stream ended after 2 chunks"):
        _client(world, stream=True).complete(MESSAGES, [])
