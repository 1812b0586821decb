"""A chat completion as OpenAI's streaming chunks (`stream: true`), as the official client
expects them: a first chunk with the role, then content or tool-call deltas (each call's
id and name first, its arguments in two pieces), a chunk with the finish reason, and, when
the request asked for `stream_options.include_usage`, a last chunk with no choices and the
usage. The world's server sends each as a server-sent event and `[DONE]` after them.
"""

from __future__ import annotations

from typing import Any


def chunks(completion: dict[str, Any], *, usage: bool) -> list[dict[str, Any]]:
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None}]
    content = message.get("content")
    if content:
        deltas.extend({"content": piece} for piece in _halves(content))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        head = {"name": function["name"], "arguments": ""}
        deltas.append(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": head}
                ]
            }
        )
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in _halves(function["arguments"])
        )
    events = [_chunk(completion, delta, None) for delta in deltas]
    events.append(_chunk(completion, {}, choice["finish_reason"]))
    if usage:
        events.append({**_base(completion), "choices": [], "usage": completion["usage"]})
    return events


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def _base(completion: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }


def _chunk(completion: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return {**_base(completion), "choices": [choice], "usage": None}
