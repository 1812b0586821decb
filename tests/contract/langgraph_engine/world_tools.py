"""The world's tools as LangChain tools, and the hardened variant's guard around them.

Naive: each tool POSTs its arguments with no idempotency key, as a plain `@tool` would.
Hardened (`guard`, a ToolNode `wrap_tool_call`): the key is `<run key>:<tool call id>`;
each call is journaled as started before it leaves and settled after it returns; a call
found started but not settled after a crash is asked by key (queryable tool), sent again
with the same key (key-honouring or replayable tool), or ends `outcome_unknown`.
"""

from __future__ import annotations

import contextvars
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import store
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest

import crashcert_probe as probe

# The key the guard chose for the call running in this thread (none in the naive variant).
CURRENT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("key", default=None)
UNKNOWN = {
    "status": "outcome_unknown",
    "note": "The action may have happened; check before retrying.",
}


def http(url: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer crashcert"}
    if key:
        headers["Idempotency-Key"] = key
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def declarations() -> dict[str, dict[str, Any]]:
    found = http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]
    return {d["function"]["name"]: d for d in found}


def _url(name: str) -> str:
    return f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{name}"


def make_tool(declaration: dict[str, Any]) -> BaseTool:
    name = declaration["function"]["name"]

    def call(**arguments: Any) -> str:
        status, answer = http(_url(name), arguments, CURRENT_KEY.get())
        if status == 200:
            return json.dumps({"status": "ok", "result": answer["result"]})
        return json.dumps({"status": "error", "error": json.dumps(answer)})

    return StructuredTool.from_function(
        func=call,
        name=name,
        description=declaration["function"].get("description", ""),
        args_schema=declaration["function"]["parameters"],
    )


def _message(request: ToolCallRequest, content: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])


def guard(tools: dict[str, dict[str, Any]]) -> Callable[..., Any]:
    def wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        call = request.tool_call
        run_key = request.runtime.config["configurable"]["thread_id"]
        key = f"{run_key}:{call['id']}"
        detail = {"tool_call_id": call["id"], "key": key}
        declaration = tools[call["name"]]
        found = store.execute("tool_get", key=key)
        if found and found[0][0] != "started":
            return _message(request, found[0][1])  # settled before the crash: reuse it
        if found:
            resolved = _resolve(declaration, key)
            if resolved is not None:
                return _settle(request, run_key, detail, resolved)
        else:
            with store.committed("tool.started", run_key, **detail) as db:
                db.execute(store.sql("tool_start"), {**detail, "run_key": run_key,
                                                     "name": call["name"]})  # fmt: skip
        token = CURRENT_KEY.set(key)
        try:
            result = execute(request)
        finally:
            CURRENT_KEY.reset(token)
        probe.report("tool.returned", run_key, **detail)
        return _settle(request, run_key, detail, result.content)

    return wrap


def _resolve(declaration: dict[str, Any], key: str) -> str | None:
    """A call started before a crash: its outcome if it can be known without sending it
    again, UNKNOWN if it must not be sent again, None to send it again (same key)."""
    if declaration.get("honours_idempotency_key") or declaration.get("replay") == "replayable":
        return None
    if declaration.get("queryable"):
        status, found = http(f"{_url(declaration['function']['name'])}/effects/{key}")
        if status == 200 and found.get("applied"):
            return json.dumps({"status": "ok", "result": found.get("result")})
        if status == 404:
            return None  # not applied, and the worker that sent it is gone
    return json.dumps(UNKNOWN)


def _settle(request: ToolCallRequest, run_key: str, detail: dict[str, Any], content: str) -> Any:
    state = {"ok": "succeeded", "outcome_unknown": "outcome_unknown"}.get(
        json.loads(content).get("status"), "failed"
    )
    with store.committed("tool.settled", run_key, **detail, state=state) as db:
        db.execute(store.sql("tool_settle"), {"key": detail["key"], "state": state,
                                              "content": content})  # fmt: skip
    return _message(request, content)
