"""The reference engine's streaming mode (reference_engine/model_client.py) against the
world's scripted model: the same answer as without streaming; a cut stream is a failed
call, retried, never an answer."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from harness.world import hooks as hooks_module
from harness.world import http
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


def _losing(fate: http.Fate) -> hooks_module.WorldHooks:
    hooks = hooks_module.WorldHooks()
    hooks.model_answered = lambda entry: (http.lose_response(fate), None)[1]
    return hooks


@pytest.mark.parametrize("after", [0, 3, 10_000])
def test_a_cut_stream_is_a_lost_answer_never_used(
    make_world: fix_world.MakeWorld, after: int
) -> None:
    world = make_world(hooks=_losing(http.Fate("cut", after)))
    with pytest.raises(errors.ModelAnswerLost, match="without its"):
        _client(world, stream=True, retries=3).complete(MESSAGES, [])
    # Not retried under the same call: the worker opens a new one (a new iteration).
    assert [entry.status_code for entry in world.model.entries()] == [200]


@pytest.mark.parametrize("stream", [False, True])
def test_a_reset_answer_is_lost_not_retried_in_place(
    make_world: fix_world.MakeWorld, stream: bool
) -> None:
    world = make_world(hooks=_losing(http.Fate("reset")))
    with pytest.raises(errors.ModelAnswerLost):
        _client(world, stream=stream, retries=3).complete(MESSAGES, [])
    assert len(world.model.entries()) == 1


def test_what_never_left_is_retried_in_place() -> None:
    client = model_client.ModelClient(
        base_url="http://127.0.0.1:9/v1", api_key="x", model="m", timeout_s=1, delays=[0.0]
    )
    with pytest.raises(errors.ModelUnavailable, match="after 2 tries"):
        client.complete(MESSAGES, [])


def test_the_streaming_description_is_the_reference_one_plus_streaming() -> None:
    """engine_stream.yaml is a copy of engine.yaml with one setting more: a command added to
    one (a scenario's purge, say) and not the other shows here, not as a campaign's
    INCONCLUSIVE."""
    here = pathlib.Path(model_client.__file__).parent
    plain = yaml.safe_load((here / "engine.yaml").read_text())
    streaming = yaml.safe_load((here / "engine_stream.yaml").read_text())
    assert streaming.pop("env") == {**plain.pop("env"), "CRASHCERT_STREAM": "1"}
    # and it offers streaming, which the plain one does not claim
    assert streaming.pop("capabilities") == {**plain.pop("capabilities", {}), "streaming": True}
    for key in ("name", "description"):
        del plain[key], streaming[key]
    assert streaming == plain
