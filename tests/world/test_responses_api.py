"""The scripted model's Responses API (`POST /v1/responses`), through the official openai
client and plain HTTP: the same script, run key, turn count and transcript problems as
Chat Completions, streamed as the Responses API streams, and cut like any stream."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from harness.world import hooks as hooks_module
from harness.world import http, responses
from harness.world import world as world_module
from tests import fix_world

INSTRUCTIONS = "You are a careful support agent."


def _client(world: world_module.World) -> Any:  # Any: the SDK's overloads want typed params
    return openai.OpenAI(base_url=world.model_url, api_key="x", max_retries=0, timeout=5)


def _user(run_key: str = "run-1") -> dict[str, Any]:
    text = f"Refund order 42. {world_module.run_marker(run_key)}"
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _call(run_key: str = "run-1", call_id: str = "call_1") -> dict[str, Any]:
    arguments = json.dumps({"order": f"{run_key}-42"})
    return {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": "refund",
            "arguments": arguments, "status": "completed"}  # fmt: skip


def _output(call_id: str = "call_1", status: str = "ok") -> dict[str, Any]:
    output = json.dumps({"status": status, "result": {"refund_id": "rf-1"}})
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _respond(http_json: fix_world.JsonClient, world: world_module.World, items: Any) -> Any:
    body = {"model": "m", "instructions": INSTRUCTIONS, "input": items}
    return http_json.post(f"{world.model_url}/responses", body)


def test_two_turns_through_the_openai_client(world: world_module.World) -> None:
    client = _client(world)
    items: list[Any] = [_user("k1")]

    first = client.responses.create(model="gpt-test", instructions=INSTRUCTIONS, input=items)

    assert first.object == "response" and first.status == "completed"
    (call,) = first.output
    assert call.type == "function_call"
    assert (call.call_id, call.name) == ("call_1", "refund")
    assert json.loads(call.arguments) == {"order": "k1-42"}
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (50, 7)
    assert first.usage.total_tokens == 57

    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append(_output("call_1"))
    second = client.responses.create(model="gpt-test", instructions=INSTRUCTIONS, input=items)

    assert second.output_text == "Refunded order 42 for k1."
    entries = world.snapshot().model
    assert [(e.run_key, e.turn, e.status_code, e.api) for e in entries] == [
        ("k1", 0, 200, "responses"),
        ("k1", 1, 200, "responses"),
    ]
    assert all(e.problems == [] for e in entries)
    assert first.id == f"resp_{entries[0].seq}"
    # The ledger holds the transcript the input stands for, as Chat Completions sends it.
    assert entries[1].messages[1:] == [
        {"role": "user", "content": items[0]["content"][0]["text"]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "refund", "arguments": json.dumps({"order": "k1-42"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": items[-1]["output"]},
    ]  # fmt: skip
    assert entries[0].usage == {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}


def test_both_protocols_see_one_transcript() -> None:
    """A Responses request and the Chat Completions request it stands for read the same."""
    chat = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": _user()["content"][0]["text"]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "refund", "arguments": _call()["arguments"]}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": _output()["output"]},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text",
            "text": "done", "annotations": []}]}  # fmt: skip
    body = {"instructions": INSTRUCTIONS, "input": [_user(), _call(), _output(), said]}
    assert responses.to_messages(body) == chat


def test_one_response_of_text_and_calls_is_one_turn() -> None:
    """The items of one Response (a message, two calls) are one assistant message: the turn
    counts Responses, not items; a reasoning item adds nothing."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    said = {"role": "assistant", "content": "Looking."}
    items = [_user(), reasoning, said, _call(), _call(call_id="call_2"), _output(),
             _output("call_2")]  # fmt: skip
    messages = responses.to_messages({"input": items})
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "Looking."
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        pytest.param([_call()], "unanswered: tool call 'call_1'", id="unanswered"),
        pytest.param([_call(), _output(), _output()], "duplicate_answer:", id="answered-twice"),
        pytest.param([_call(), _output(), _output("call_9")], "unknown_call:", id="unknown-id"),
        pytest.param(
            [_call(), {"type": "function_call_output", "call_id": "call_1", "output": "done"}],
            "bad_tool_content: messages[3] ('call_1') content is not JSON",
            id="not-json",
        ),
        pytest.param([_call(), _output(status="maybe")], "bad_tool_content:", id="bad-status"),
    ],
)
def test_transcript_problems_are_recorded_and_answered(
    world: world_module.World, http_json: fix_world.JsonClient, tail: list[Any], code: str
) -> None:
    reply = _respond(http_json, world, [_user(), *tail])
    assert reply.status == 200, reply.body
    (entry,) = world.snapshot().model
    assert any(problem.startswith(code) for problem in entry.problems), entry.problems


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param({"input": []}, "'input' must be", id="empty"),
        pytest.param({"input": "hello"}, "no run marker", id="no-marker"),
        pytest.param(
            {"input": [_user()], "previous_response_id": "resp_1"},
            "'previous_response_id' is not supported",
            id="stateful",
        ),
        pytest.param({"input": [{"type": "web_search_call"}]}, "unsupported type", id="item"),
    ],
)
def test_bad_requests_are_refused_and_recorded(
    world: world_module.World, http_json: fix_world.JsonClient, body: Any, says: str
) -> None:
    reply = http_json.post(f"{world.model_url}/responses", {"model": "m", **body})
    assert reply.status == 400
    assert says in reply.body["error"]["message"]
    (entry,) = world.snapshot().model
    assert (entry.status_code, entry.api) == (400, "responses")


def test_a_stream_is_read_by_the_official_client(world: world_module.World) -> None:
    client = _client(world)
    events = list(client.responses.create(model="m", input=[_user()], stream=True))
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"order": "run-1-42"}
    final = events[-1].response
    assert final.output[0].call_id == "call_1" and final.usage.total_tokens == 57
    (entry,) = world.snapshot().model
    assert (entry.stream, entry.api) == (True, "responses")

    items = [_user(), *(item.model_dump(exclude_none=True) for item in final.output), _output()]
    with client.responses.stream(model="m", input=items) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        assert stream.get_final_response().output_text == text == "Refunded order 42 for run-1."


@pytest.mark.parametrize("after", [0, 3, 10_000])
def test_a_cut_stream_ends_before_response_completed(
    make_world: fix_world.MakeWorld, after: int
) -> None:
    hooks = hooks_module.WorldHooks()
    hooks.model_answered = lambda entry: (http.lose_response(http.Fate("cut", after)), None)[1]
    world = make_world(hooks=hooks)
    events = list(_client(world).responses.create(model="m", input=[_user()], stream=True))
    kinds = [event.type for event in events]  # no error: the body ends cleanly, only shorter
    assert "response.completed" not in kinds
    if after < 10_000:
        assert len(kinds) == after
    assert world.model.entries()[0].status_code == 200  # answered (and billed) all the same


def test_the_agents_sdk_responses_model_talks_to_the_world(world: world_module.World) -> None:
    """The OpenAI Agents SDK's default model class, unmodified, against the world."""
    agents = pytest.importorskip("agents", reason="openai-agents not installed")
    import asyncio

    client = openai.AsyncOpenAI(base_url=world.model_url, api_key="x", max_retries=0)
    agents.set_tracing_disabled(True)
    agent = agents.Agent(
        name="support",
        instructions=INSTRUCTIONS,
        model=agents.OpenAIResponsesModel("m", client),
        tools=[agents.function_tool(_refund, name_override="refund")],
    )
    prompt = _user()["content"][0]["text"]
    result = asyncio.run(agents.Runner.run(agent, prompt))
    assert result.final_output == "Refunded order 42 for run-1."
    entries = world.snapshot().model
    assert [(e.turn, e.api, e.problems) for e in entries] == [
        (0, "responses", []),
        (1, "responses", []),
    ]


def _refund(order: str) -> str:
    return json.dumps({"status": "ok", "result": {"refund_id": f"rf-{order}"}})
