"""The world's tools as OpenAI Agents SDK `FunctionTool`s, and the hardened journal.

Naive: each tool POSTs its arguments with no idempotency key. Hardened: the key is
`<run key>:<tool call id>` (the SDK's `ToolContext.tool_call_id`, the model's call id, the
same on every replay because the model's answers are replayed from the table); each call is
journaled as started before it leaves and settled after; a call found settled is answered
from the journal, one found started after a crash is asked by key (queryable tool), sent
again with the same key (key-honouring or replayable tool), or ends `outcome_unknown`.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from typing import Any

import store
from agents import FunctionTool
from agents.tool_context import ToolContext

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


def _send(name: str, arguments: str, key: str | None) -> str:
    status, answer = http(_url(name), json.loads(arguments or "{}"), key)
    if status == 200:
        return json.dumps({"status": "ok", "result": answer["result"]})
    return json.dumps({"status": "error", "error": json.dumps(answer)})


def make_tool(declaration: dict[str, Any], *, hardened: bool) -> FunctionTool:
    function = declaration["function"]
    name = function["name"]

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        if not hardened:
            return await asyncio.to_thread(_send, name, arguments, None)
        return await asyncio.to_thread(
            _guarded, declaration, ctx.context, ctx.tool_call_id, arguments
        )

    return FunctionTool(
        name=name,
        description=function.get("description", ""),
        params_json_schema=function["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,  # the world's schemas are not written for strict mode
    )


def _guarded(declaration: dict[str, Any], run: Any, call_id: str, arguments: str) -> str:
    import crashcert_probe as probe

    run_key = run["run_key"]
    name = declaration["function"]["name"]
    key = f"{run_key}:{call_id}"
    detail = {"tool_call_id": call_id, "key": key}
    found = store.execute("tool_get", key=key)
    if found and found[0][0] != "started":
        return str(found[0][1])  # settled before the crash: the same answer again
    if found:
        resolved = _resolve(declaration, key)
        if resolved is not None:
            return _settle(run_key, detail, resolved)
    else:
        with store.committed("tool.started", run_key, **detail) as db:
            db.execute(store.sql("tool_start"), {**detail, "run_key": run_key, "name": name})
    content = _send(name, arguments, key)
    probe.report("tool.returned", run_key, **detail)
    return _settle(run_key, detail, content)


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


def _settle(run_key: str, detail: dict[str, Any], content: str) -> str:
    state = {"ok": "succeeded", "outcome_unknown": "outcome_unknown"}.get(
        json.loads(content).get("status"), "failed"
    )
    with store.committed("tool.settled", run_key, **detail, state=state) as db:
        db.execute(
            store.sql("tool_settle"), {"key": detail["key"], "state": state, "content": content}
        )
    return content
