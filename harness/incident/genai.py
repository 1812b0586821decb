"""The OpenTelemetry GenAI semantic conventions, read: attribute names and message formats.

Chat spans (`gen_ai.operation.name` = `chat`) carry `gen_ai.input.messages`,
`gen_ai.output.messages` (opt-in content), `gen_ai.system_instructions`,
`gen_ai.tool.definitions` and `gen_ai.usage.input_tokens`/`output_tokens`; tool spans
(`execute_tool`) carry `gen_ai.tool.name`, `gen_ai.tool.call.id`,
`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, `error.type` and the span status.
Messages are `{"role", "parts": [...]}` with parts `text` (`content`), `tool_call` (`id`,
`name`, `arguments`) and `tool_call_response` (`id`, `response`); the OpenAI shape
(`content`, `tool_calls`) that older instrumentations record is read too. Pure.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

OPERATION = "gen_ai.operation.name"
CONVERSATION = "gen_ai.conversation.id"
INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
SYSTEM = "gen_ai.system_instructions"
DEFINITIONS = "gen_ai.tool.definitions"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_DESCRIPTION = "gen_ai.tool.description"
CALL_ID = "gen_ai.tool.call.id"
CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
CHAT, EXECUTE_TOOL = "chat", "execute_tool"


@dataclasses.dataclass(frozen=True)
class Call:
    """A tool call the model decided."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Answer:
    """One assistant message: tool calls or text."""

    calls: list[Call]
    content: str | None


def messages(value: Any) -> list[dict[str, Any]] | None:
    """A messages attribute as a list of message objects; None when it is not one."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, dict)]


def parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's parts, from the GenAI form or the OpenAI one."""
    found = message.get("parts")
    if isinstance(found, list):
        return [part for part in found if isinstance(part, dict)]
    converted: list[dict[str, Any]] = []
    content = message.get("content")
    if message.get("role") == "tool":
        converted.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str) and content:
        converted.append({"type": "text", "content": content})
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            converted.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
    return converted


def text_of(message: dict[str, Any]) -> str | None:
    texts = [str(p.get("content")) for p in parts(message) if p.get("type") == "text"]
    return "".join(texts) if texts else None


def answer(message: dict[str, Any]) -> Answer:
    calls = [
        Call(
            id=str(part.get("id") or ""),
            name=str(part.get("name") or ""),
            arguments=arguments(part.get("arguments")),
        )
        for part in parts(message)
        if part.get("type") == "tool_call"
    ]
    return Answer(calls=calls, content=None if calls else text_of(message))


def arguments(value: Any) -> dict[str, Any]:
    """Call arguments as an object: JSON text is read, anything else is wrapped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"value": value}
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"value": value}


def assistant_turns(history: list[dict[str, Any]]) -> list[Answer]:
    """The assistant messages of an input history, in order: turn 0, 1, ..."""
    return [answer(message) for message in history if message.get("role") == "assistant"]


def responses(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool call id -> the response the model was given for it."""
    found: dict[str, Any] = {}
    for message in history:
        for part in parts(message):
            if part.get("type") == "tool_call_response" and part.get("id") is not None:
                found[str(part["id"]).strip()] = part.get("response", part.get("result"))
    return found


def response_state(response: Any) -> tuple[str, Any]:
    """What a tool response told the model: (`ok`, result), (`outcome_unknown`, None) or
    (`error`, None). The engine contract's tool message is JSON text with a `status`;
    any other response is taken as the tool's result."""
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return "ok", response
    if isinstance(response, dict) and response.get("status") in ("ok", "error", "outcome_unknown"):
        return str(response["status"]), response.get("result")
    return "ok", response


def definitions(value: Any) -> dict[str, dict[str, Any]]:
    """Tool name -> definition, from gen_ai.tool.definitions (flat or OpenAI-nested)."""
    found: dict[str, dict[str, Any]] = {}
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        function = item.get("function")
        flat = {**item, **(function if isinstance(function, dict) else {})}
        name = flat.get("name")
        if isinstance(name, str) and name:
            found[name] = flat
    return found


def system_text(value: Any) -> str | None:
    """gen_ai.system_instructions: a list of text parts, or plain text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [str(p.get("content")) for p in value if isinstance(p, dict) and "content" in p]
        return "\n".join(texts) if texts else None
    return None
