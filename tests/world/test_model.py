"""The scripted model, through the official openai client and plain HTTP."""

from __future__ import annotations

import concurrent.futures
import copy
import json
import threading
from typing import Any

import openai
import pytest

from harness import errors
from harness.world import hooks as hooks_module
from harness.world import ledger
from harness.world import world as world_module
from tests import fix_world


def _client(world: world_module.World) -> openai.OpenAI:
    return openai.OpenAI(base_url=world.model_url, api_key="x", max_retries=0, timeout=5)


def _first_messages(run_key: str = "run-1") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a careful support agent."},
        {"role": "user", "content": f"Refund order 42. {world_module.run_marker(run_key)}"},
    ]


def _tool_turn(run_key: str = "run-1") -> dict[str, Any]:
    arguments = json.dumps({"order": f"{run_key}-42"})
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "refund", "arguments": arguments},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _answer(call_id: str = "call_1", status: str = "ok") -> dict[str, Any]:
    content = json.dumps({"status": status, "result": {"refund_id": "rf-1"}})
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _chat(
    http_json: fix_world.JsonClient, world: world_module.World, body: Any
) -> fix_world.JsonReply:
    return http_json.post(f"{world.model_url}/chat/completions", body)


def test_two_turns_through_the_openai_client(world: world_module.World) -> None:
    client = _client(world)
    messages = _first_messages("k1")

    first = client.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.id == "call_1"
    assert call.type == "function"
    assert call.function.name == "refund"
    assert json.loads(call.function.arguments) == {"order": "k1-42"}
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (50, 7)
    assert first.usage.total_tokens == 57
    assert first.model == "gpt-test"
    assert first.object == "chat.completion"

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append(_answer("call_1"))
    second = client.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]

    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Refunded order 42 for k1."
    assert second.usage is not None and second.usage.total_tokens == 89

    entries = world.snapshot().model
    assert [(e.run_key, e.turn, e.status_code) for e in entries] == [("k1", 0, 200), ("k1", 1, 200)]
    assert all(e.problems == [] for e in entries)
    assert entries[0].seq < entries[1].seq
    assert first.id == f"chatcmpl-{entries[0].seq}"
    assert entries[0].usage == {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
    assert entries[1].response == {"role": "assistant", "content": "Refunded order 42 for k1."}
    assert entries[1].messages == messages


def test_runs_share_the_script_with_their_own_key(world: world_module.World) -> None:
    client = _client(world)
    for key in ("a", "b"):
        reply = client.chat.completions.create(model="m", messages=_first_messages(key))  # type: ignore[arg-type]
        calls = reply.choices[0].message.tool_calls
        assert calls is not None
        assert json.loads(calls[0].function.arguments) == {"order": f"{key}-42"}  # type: ignore[union-attr]
    assert [e.run_key for e in world.snapshot().model] == ["a", "b"]


def _problems(world: world_module.World) -> list[str]:
    return world.snapshot().model[-1].problems


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        pytest.param([_tool_turn()], "unanswered: tool call 'call_1'", id="unanswered"),
        pytest.param(
            [_tool_turn(), _answer(), _answer()], "duplicate_answer:", id="answered-twice"
        ),
        pytest.param(
            [_tool_turn(), _answer(), _answer("call_9")], "unknown_call:", id="unknown-id"
        ),
        pytest.param(
            [_tool_turn(), {"role": "tool", "tool_call_id": "call_1", "content": "done"}],
            "bad_tool_content: messages[3] ('call_1') content is not JSON",
            id="not-json",
        ),
        pytest.param(
            [_tool_turn(), _answer(status="maybe")], "bad_tool_content:", id="unknown-status"
        ),
    ],
)
def test_transcript_problems_are_recorded_and_answered(
    world: world_module.World, http_json: fix_world.JsonClient, tail: list[Any], code: str
) -> None:
    reply = _chat(http_json, world, {"model": "m", "messages": _first_messages() + tail})

    assert reply.status == 200  # the model observes; the checker judges
    assert reply.body["choices"][0]["message"]["content"] == "Refunded order 42 for run-1."
    assert any(problem.startswith(code) for problem in _problems(world)), _problems(world)


def test_outcome_unknown_answer_is_not_a_problem(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    note = {"status": "outcome_unknown", "note": "The action may have happened."}
    answer = {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(note)}
    messages = [*_first_messages(), _tool_turn(), answer]

    assert _chat(http_json, world, {"messages": messages}).status == 200
    assert _problems(world) == []


def test_tool_calls_that_differ_from_the_script_are_recorded(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    changed = copy.deepcopy(_tool_turn())
    changed["tool_calls"][0]["function"]["arguments"] = json.dumps({"order": "other"})
    messages = [*_first_messages(), changed, _answer()]

    assert _chat(http_json, world, {"messages": messages}).status == 200
    (problem,) = _problems(world)
    assert problem.startswith("script_mismatch: messages[2] (turn 1) tool call 'call_1' arguments")


def test_a_late_answer_is_unanswered_then_late(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    final = {"role": "assistant", "content": "Refunded order 42 for run-1."}
    messages = [*_first_messages(), _tool_turn(), final, _answer()]

    # Two assistant messages: the script is done, yet the transcript is still checked.
    reply = _chat(http_json, world, {"messages": messages})

    assert reply.status == 400
    codes = [problem.split(":")[0] for problem in _problems(world)]
    assert codes == ["unanswered", "late_answer"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{not json", "not valid JSON", id="bad-json"),
        pytest.param(b"[1, 2]", "must be a JSON object", id="not-an-object"),
        pytest.param({"messages": "hi"}, "'messages' must be", id="messages-not-a-list"),
        pytest.param(
            {"messages": [{"role": "user", "content": "no marker"}]},
            "no run marker",
            id="no-marker",
        ),
        pytest.param(
            {
                "messages": [
                    *_first_messages(),
                    _tool_turn(),
                    _answer(),
                    {"role": "assistant", "content": "x"},
                ]
            },
            "script exhausted",
            id="script-exhausted",
        ),
    ],
)
def test_bad_requests_get_json_errors_and_the_model_keeps_serving(
    world: world_module.World, http_json: fix_world.JsonClient, body: Any, message: str
) -> None:
    url = f"{world.model_url}/chat/completions"
    if isinstance(body, bytes):
        reply = http_json.post(url, raw=body)
    else:
        reply = http_json.post(url, body)

    assert reply.status == 400
    assert reply.headers["Content-Type"] == "application/json"
    assert message in reply.body["error"]["message"]
    assert reply.body["error"]["type"] == "invalid_request_error"
    (entry,) = world.snapshot().model
    assert entry.status_code == 400
    assert entry.response is None and entry.usage is None
    assert entry.error is not None and message in entry.error

    assert _chat(http_json, world, {"messages": _first_messages()}).status == 200


def test_openai_client_sees_script_exhausted_as_bad_request(world: world_module.World) -> None:
    messages = [*_first_messages(), _tool_turn(), _answer(), {"role": "assistant", "content": "x"}]
    with pytest.raises(openai.BadRequestError, match="script exhausted"):
        _client(world).chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert world.snapshot().model[0].turn == 2


def test_unknown_path_and_wrong_method(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    missing = http_json.post(f"{world.model_url}/completions", {})
    assert missing.status == 404
    assert missing.body["error"]["type"] == "not_found"

    wrong = http_json.get(f"{world.model_url}/chat/completions")
    assert wrong.status == 405
    assert wrong.headers["Allow"] == "POST"

    models = _client(world).models.list()
    assert [model.id for model in models.data] == ["crashcert-scripted"]


def test_run_marker_and_find_run_key() -> None:
    marker = world_module.run_marker("trial-7.run-1")
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": f" {marker}"}]
    messages = [
        {"role": "system", "content": marker.replace("7", "8")},
        {"role": "user", "content": parts},
    ]

    assert world_module.find_run_key(messages) == "trial-7.run-1"
    assert world_module.find_run_key([{"role": "user", "content": "none"}]) is None
    assert world_module.find_run_key([]) is None
    with pytest.raises(errors.CrashcertError, match="invalid run key"):
        world_module.run_marker("has space")


def test_registered_runs_make_other_keys_a_problem(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    assert world.register_run("known") == "[crashcert-run: known]"

    _chat(http_json, world, {"messages": _first_messages("known")})
    _chat(http_json, world, {"messages": _first_messages("stranger")})

    known, stranger = world.snapshot().model
    assert known.problems == []
    assert stranger.problems[0].startswith("unregistered_run:")


def test_model_answered_hook_runs_before_the_response_is_sent(
    make_world: fix_world.MakeWorld,
) -> None:
    entered, release, received = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, bool]] = []

    def hold(entry: ledger.ModelRequest) -> None:
        seen.append((entry.seq, received.is_set()))
        entered.set()
        release.wait(5)

    world = make_world(hooks=hooks_module.WorldHooks(model_answered=hold))

    def call() -> Any:
        reply = _client(world).chat.completions.create(model="m", messages=_first_messages())  # type: ignore[arg-type]
        received.set()
        return reply

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        client_call = pool.submit(call)
        assert entered.wait(5)
        # The answer is recorded but the client is still waiting for it.
        assert world.snapshot().model[0].status_code == 200
        assert not client_call.done()
        release.set()
        reply = client_call.result(5)
    assert seen == [(world.snapshot().model[0].seq, False)]
    assert reply.choices[0].finish_reason == "tool_calls"


def test_a_failing_hook_does_not_break_the_answer(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    def boom(entry: ledger.ModelRequest) -> None:
        raise RuntimeError("hook bug")

    world = make_world(hooks=hooks_module.WorldHooks(model_answered=boom))

    assert _chat(http_json, world, {"messages": _first_messages()}).status == 200


def test_client_gone_during_a_hook_is_harmless(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    client_gave_up = threading.Event()
    calls: list[int] = []

    def hold_until_client_left(entry: ledger.ModelRequest) -> None:
        calls.append(entry.seq)
        if len(calls) == 1:
            client_gave_up.wait(5)

    world = make_world(hooks=hooks_module.WorldHooks(model_answered=hold_until_client_left))
    with pytest.raises(TimeoutError):
        http_json.post(
            f"{world.model_url}/chat/completions", {"messages": _first_messages()}, timeout=0.3
        )
    client_gave_up.set()

    assert _chat(http_json, world, {"messages": _first_messages()}).status == 200
    assert len(world.snapshot().model) == 2
