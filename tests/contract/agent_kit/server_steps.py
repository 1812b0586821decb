"""The tool call and the reply as steps of an agent on a durable-execution server (Temporal
activities, Restate steps): the server may run a step again, so the hardened variant
(`derived`) sends the key derived from the run and the call, and first asks a queryable
tool that ignores keys, and the reply sink, whether that key already took effect. The
naive one sends a fresh key on every attempt."""

from __future__ import annotations

import uuid
from typing import Any

from agent_kit.world import http, reply_url, tool_url


def call_tool(
    declaration: dict[str, Any], arguments: Any, key: str, *, derived: bool
) -> dict[str, Any]:
    """{"key": the key sent, "content": the answer as the model is shown it}."""
    base = tool_url(declaration["function"]["name"])
    sent = key if derived else str(uuid.uuid4())
    if derived and declaration.get("queryable") and not declaration.get("honours_idempotency_key"):
        found_status, found = http(f"{base}/effects/{key}")
        if found_status == 200 and found.get("applied"):
            return {"key": key, "content": {"status": "ok", "result": found.get("result")}}
    status, answer = http(base, arguments, sent)
    if status == 200:
        return {"key": sent, "content": {"status": "ok", "result": answer["result"]}}
    return {"key": sent, "content": {"status": "error", "error": str(answer)}}


def deliver(run_id: str, content: str, *, derived: bool) -> str:
    """Post the reply; returns the key it carried."""
    base = reply_url()
    key = f"{run_id}:reply" if derived else str(uuid.uuid4())
    if derived:
        status, _ = http(f"{base}/{key}")
        if status == 200:
            return key  # delivered before the crash: never twice
    http(base, {"run_id": run_id, "content": content}, key)
    return key
