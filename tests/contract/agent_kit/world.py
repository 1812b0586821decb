"""The world's services over HTTP, as an agent reaches them: the tools' declarations, a
tool call (with an idempotency key or none), the reply sink. Standard library only."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

# A call that may have happened and must not be sent again: the model is told so.
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
    """The world's tools by name, in the Chat Completions `tools` shape."""
    found = http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]
    return {d["function"]["name"]: d for d in found}


def tool_url(name: str) -> str:
    return f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{name}"


def call_tool(name: str, arguments: dict[str, Any], key: str | None) -> str:
    """The tool's answer as the model is shown it: {"status": "ok", "result": ...} or an error."""
    status, answer = http(tool_url(name), arguments, key)
    if status == 200:
        return json.dumps({"status": "ok", "result": answer["result"]})
    return json.dumps({"status": "error", "error": json.dumps(answer)})


def reply_url() -> str:
    return os.environ["CRASHCERT_REPLY_URL"] + "/replies"
