"""The world's tools as Pydantic AI `Tool`s (`Tool.from_schema`), and the hardened journal.

Naive: each tool POSTs its arguments with no idempotency key. Hardened: the call goes
through the journal (agent_kit/journal.py), keyed `<run key>:<tool call id>` with Pydantic
AI's `RunContext.tool_call_id`: the model's call id, the same on every replay because the
model's answers are replayed from the table.
"""

from __future__ import annotations

from typing import Any

from agent_kit import journal, world
from pydantic_ai import RunContext, Tool


def make_tool(declaration: dict[str, Any], *, hardened: bool) -> Tool[Any]:
    function = declaration["function"]
    name = function["name"]

    def invoke(ctx: RunContext[dict[str, Any]], **arguments: Any) -> str:
        if not hardened:
            return world.call_tool(name, arguments, None)
        run_key = ctx.deps["run_key"]
        return journal.journaled(
            declaration, run_key, str(ctx.tool_call_id),
            lambda key: world.call_tool(name, arguments, key),
        )  # fmt: skip

    return Tool.from_schema(
        invoke,
        name=name,
        description=function.get("description", ""),
        json_schema=function["parameters"],
        takes_ctx=True,
    )
