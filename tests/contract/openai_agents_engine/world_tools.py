"""The world's tools as OpenAI Agents SDK `FunctionTool`s, and the hardened journal.

Naive: each tool POSTs its arguments with no idempotency key. Hardened: the call goes
through the journal (agent_kit/journal.py), keyed `<run key>:<tool call id>` with the SDK's
`ToolContext.tool_call_id`: the model's call id, the same on every replay because the
model's answers are replayed from the table.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_kit import journal, world
from agents import FunctionTool
from agents.tool_context import ToolContext


def make_tool(declaration: dict[str, Any], *, hardened: bool) -> FunctionTool:
    function = declaration["function"]
    name = function["name"]

    def send(arguments: str, key: str | None) -> str:
        return world.call_tool(name, json.loads(arguments or "{}"), key)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        if not hardened:
            return await asyncio.to_thread(send, arguments, None)
        run_key = ctx.context["run_key"]
        return await asyncio.to_thread(
            journal.journaled, declaration, run_key, ctx.tool_call_id,
            lambda key: send(arguments, key),
        )  # fmt: skip

    return FunctionTool(
        name=name,
        description=function.get("description", ""),
        params_json_schema=function["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,  # the world's schemas are not written for strict mode
    )
