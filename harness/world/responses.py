"""The scripted model's second protocol: OpenAI's Responses API (`POST /v1/responses`).

A request's `input` (and `instructions`) is read as the Chat Completions transcript it
stands for, so the model finds the run, counts the turn and checks the transcript exactly
as for `/v1/chat/completions`: the consecutive `function_call` and assistant `message`
items between two user or `function_call_output` items are one assistant message (one
turn, as one Response's output is), a `function_call_output` is the `tool` message of its
`call_id`. The answer is a Response object, or, with `stream: true`, its events
(`response.created` ... `response.completed`, each with `event:` and a `sequence_number`,
no `[DONE]`), so a cut stream lacks `response.completed`. The world keeps no state
between requests: `previous_response_id` and `conversation` are refused.
"""

from __future__ import annotations

from typing import Any, Literal

from harness.world import http

API: Literal["responses"] = "responses"
_ASSISTANT_ITEMS = ("function_call", "reasoning")
_TEXT_PARTS = ("input_text", "output_text", "text")


def to_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Chat Completions messages a Responses request's transcript stands for."""
    for stateful in ("previous_response_id", "conversation"):
        if body.get(stateful) is not None:
            raise http.HttpError(
                400,
                f"{stateful!r} is not supported: the world keeps no responses; "
                "send the whole transcript in 'input'",
            )
    raw = body.get("input")
    items: Any = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise http.HttpError(400, "'input' must be a non-empty string or array of items")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        messages.append({"role": "system", "content": instructions})
    assistant: dict[str, Any] | None = None  # the turn being assembled from its items
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise http.HttpError(400, f"input[{index}] must be an object")
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in _ASSISTANT_ITEMS or (kind == "message" and role == "assistant"):
            if assistant is None:
                assistant = {"role": "assistant", "content": None}
                messages.append(assistant)
            _add_to_turn(assistant, item, index)
            continue
        assistant = None
        if kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise http.HttpError(400, f"input[{index}] function_call_output needs a call_id")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(item)})
        elif kind == "message" and isinstance(role, str):
            messages.append({"role": role, "content": _text(item, "content")})
        else:
            raise http.HttpError(400, f"input[{index}] has an unsupported type {kind!r}")
    return messages


def _add_to_turn(assistant: dict[str, Any], item: dict[str, Any], index: int) -> None:
    if item.get("type") == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise http.HttpError(400, f"input[{index}] function_call needs call_id and name")
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": str(item.get("arguments", ""))},
        }
        assistant.setdefault("tool_calls", []).append(call)
    elif item.get("type", "message") == "message":
        text = _text(item, "content")
        assistant["content"] = (assistant["content"] or "") + (text or "")


def _text(item: dict[str, Any], field: str = "output") -> str | None:
    """A string, or the text of `input_text`/`output_text` parts; None for anything else."""
    value = item.get(field)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(part.get("text", ""))
            for part in value
            if isinstance(part, dict) and part.get("type") in _TEXT_PARTS
        )
    return None


def response(
    message: dict[str, Any], usage: dict[str, int], *, seq: int, created: int, model: str
) -> dict[str, Any]:
    """The Response object answering with the scripted assistant `message`."""
    output: list[dict[str, Any]] = []
    if message.get("content") is not None:
        part = {
            "type": "output_text",
            "text": message["content"],
            "annotations": [],
            "logprobs": [],
        }
        output.append(
            {
                "type": "message",
                "id": f"msg_{seq}",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{seq}_{index}",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{seq}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": None,
        "top_p": None,
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }


def events(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events streaming `answer`: each output item added, its text or its
    arguments in two deltas, done, then `response.completed` with the whole Response."""
    pending = {**answer, "status": "in_progress", "output": [], "usage": None}
    found: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for position, item in enumerate(answer["output"]):
        where = {"item_id": item["id"], "output_index": position}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            empty = {**item, "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            found.append(
                {"type": "response.output_item.added", "output_index": position, "item": empty}
            )
            found.append(
                {"type": "response.content_part.added", **where, "content_index": 0, "part": part}
            )
            found.extend(
                {
                    "type": "response.output_text.delta",
                    **where,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
                for piece in _halves(text)
            )
            found.append(
                {
                    "type": "response.output_text.done",
                    **where,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                }
            )
            found.append(
                {
                    "type": "response.content_part.done",
                    **where,
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
        else:
            empty = {**item, "arguments": "", "status": "in_progress"}
            found.append(
                {"type": "response.output_item.added", "output_index": position, "item": empty}
            )
            found.extend(
                {"type": "response.function_call_arguments.delta", **where, "delta": piece}
                for piece in _halves(item["arguments"])
            )
            found.append(
                {
                    "type": "response.function_call_arguments.done",
                    **where,
                    "arguments": item["arguments"],
                }
            )
        found.append({"type": "response.output_item.done", "output_index": position, "item": item})
    found.append({"type": "response.completed", "response": answer})
    return [{**event, "sequence_number": number} for number, event in enumerate(found)]


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]
