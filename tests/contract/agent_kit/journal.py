"""The hardened variants' tool journal: the key is `<run key>:<tool call id>` (the model's
call id, the same on every replay or resume); each call is journaled as started before it
leaves and settled after; a call found settled is answered from the journal, one found
started after a crash is asked by key (queryable tool), sent again with the same key
(key-honouring or replayable tool), or ends `outcome_unknown`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import crashcert_probe as probe
from agent_kit import store, world


def journaled(
    declaration: dict[str, Any], run_key: str, call_id: str, send: Callable[[str], str]
) -> str:
    """The call's content: `send(key)` makes the call with that key, at most as the journal
    allows (never again once settled, never blindly after a crash)."""
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
    content = send(key)
    probe.report("tool.returned", run_key, **detail)
    return _settle(run_key, detail, content)


def _resolve(declaration: dict[str, Any], key: str) -> str | None:
    """A call started before a crash: its outcome if it can be known without sending it
    again, UNKNOWN if it must not be sent again, None to send it again (same key)."""
    if declaration.get("honours_idempotency_key") or declaration.get("replay") == "replayable":
        return None
    if declaration.get("queryable"):
        name = declaration["function"]["name"]
        status, found = world.http(f"{world.tool_url(name)}/effects/{key}")
        if status == 200 and found.get("applied"):
            return json.dumps({"status": "ok", "result": found.get("result")})
        if status == 404:
            return None  # not applied, and the worker that sent it is gone
    return json.dumps(world.UNKNOWN)


def _settle(run_key: str, detail: dict[str, Any], content: str) -> str:
    state = {"ok": "succeeded", "outcome_unknown": "outcome_unknown"}.get(
        json.loads(content).get("status"), "failed"
    )
    with store.committed("tool.settled", run_key, **detail, state=state) as db:
        db.execute(
            store.sql("tool_settle"), {"key": detail["key"], "state": state, "content": content}
        )
    return content
