"""The reference engine sends the transcript through the openai client's `extra_body`
(model_client.wire_body), skipping the client's per-message transform: that is only right
while the transform would have sent the very same JSON for the engine's messages."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from openai._utils import maybe_transform
from openai.types.chat import completion_create_params

from reference_engine import model_client

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Refund an order",
            "parameters": {
                "type": "object",
                "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["order"],
            },
        },
    }
]
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Refund order 42, please. [run crashcert-x]"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "refund", "arguments": '{"order": "42", "amount": 10}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"refunded": true}'},
    {"role": "assistant", "content": "Done: order 42 is refunded."},
]


def test_wire_body_is_what_the_client_transform_sends() -> None:
    for tools in (TOOLS, []):
        body = {"model": "m", **model_client.wire_body(TRANSCRIPT, tools)}
        typed = completion_create_params.CompletionCreateParamsNonStreaming
        assert maybe_transform(body, typed) == body
        assert body["messages"] is TRANSCRIPT
        assert body.get("tools", []) == tools


@pytest.mark.processes
def test_the_response_models_are_built_at_import_for_the_fork_server() -> None:
    """Built on first use, they cost every fresh worker ~3 ms of CPU on its first model call;
    built when the fork server imports the client, forked workers inherit them built. In a
    fresh interpreter: this test process may have built them already."""
    probe = (
        "from reference_engine import model_client\n"
        "from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage\n"
        "print([t.__pydantic_complete__ for t in (ChatCompletion, ChatCompletionMessage, "
        "ChatCompletionChunk)])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[True, True, True]"
