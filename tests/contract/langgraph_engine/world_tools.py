"""The world's tools as LangChain tools, and the hardened variant's guard around them.

Naive: each tool POSTs its arguments with no idempotency key, as a plain `@tool` would.
Hardened (`guard`, a ToolNode `wrap_tool_call`): the call goes through the journal
(agent_kit/journal.py), keyed `<run key>:<tool call id>`, the key handed to the tool in a
context variable.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from agent_kit import journal, world
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest

# The key the guard chose for the call running in this thread (none in the naive variant).
CURRENT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("key", default=None)


def make_tool(declaration: dict[str, Any]) -> BaseTool:
    name = declaration["function"]["name"]

    def call(**arguments: Any) -> str:
        return world.call_tool(name, arguments, CURRENT_KEY.get())

    return StructuredTool.from_function(
        func=call,
        name=name,
        description=declaration["function"].get("description", ""),
        args_schema=declaration["function"]["parameters"],
    )


def guard(tools: dict[str, dict[str, Any]]) -> Callable[..., Any]:
    def wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        call = request.tool_call
        run_key = request.runtime.config["configurable"]["thread_id"]

        def send(key: str) -> str:
            token = CURRENT_KEY.set(key)
            try:
                return str(execute(request).content)
            finally:
                CURRENT_KEY.reset(token)

        content = journal.journaled(tools[call["name"]], run_key, call["id"], send)
        return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])

    return wrap
