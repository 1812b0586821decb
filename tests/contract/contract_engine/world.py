"""The outside of the contract engine: the control channel and the world's HTTP services."""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

HTTP_TIMEOUT_S = 10
# The status `http` gives a request whose connection was refused: it never left, so nothing
# was applied and the same request may be sent again (CONTRACT.md s. 3 and 5).
REFUSED = -1
UNKNOWN_NOTE = "The action may have happened; check before retrying."
_control: socket.socket | None = None
_buffer = b""


def report(boundary: str, run_id: str, detail: dict[str, Any] | None = None) -> None:
    """Writes one boundary line to CRASHCERT_CONTROL and blocks until the harness answers."""
    global _control, _buffer
    path = os.environ.get("CRASHCERT_CONTROL")
    if not path:
        return
    line = {
        "v": 1,
        "boundary": boundary,
        "run_id": run_id,
        "pid": os.getpid(),
        "worker_id": os.environ.get("CRASHCERT_WORKER_ID"),
        "detail": detail or {},
    }
    try:
        if _control is None:
            _control = socket.socket(socket.AF_UNIX)
            _control.connect(path)
        _control.sendall(json.dumps(line).encode() + b"\n")
        while b"\n" not in _buffer:
            chunk = _control.recv(4096)
            if not chunk:
                raise OSError("control channel closed")
            _buffer += chunk
    except OSError:
        os._exit(70)  # the harness is gone
    _, _, _buffer = _buffer.partition(b"\n")


def http(method: str, url: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
    """One request; (status, JSON body). A refused connection is REFUSED (never sent); any
    other transport failure is status 0: nothing known."""
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'crashcert')}",
    }
    if key:
        headers["Idempotency-Key"] = key
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"null")
        except ValueError:
            return error.code, None
    except (OSError, ValueError) as error:
        refused = isinstance(getattr(error, "reason", error), ConnectionRefusedError)
        return (REFUSED if refused else 0), None


def tools() -> dict[str, dict[str, Any]]:
    status, body = http("GET", os.environ["CRASHCERT_TOOLS_URL"] + "/tools")
    if status != 200:
        raise OSError(f"GET /tools answered {status}")
    return {t["function"]["name"]: t for t in body["tools"]}


def chat(messages: list[dict[str, Any]], declarations: list[dict[str, Any]]) -> tuple[int, Any]:
    body: dict[str, Any] = {"model": "crashcert", "messages": messages}
    if declarations:
        body["tools"] = [{"type": d["type"], "function": d["function"]} for d in declarations]
    return http("POST", os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions", body)


def call_tool(name: str, arguments: dict[str, Any], key: str) -> tuple[int, Any]:
    return http("POST", f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{_q(name)}", arguments, key)


def tool_effect(name: str, key: str) -> tuple[bool | None, Any]:
    """Asks a queryable tool by key: (applied, result); applied None when it did not say."""
    url = f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{_q(name)}/effects/{_q(key)}"
    status, body = http("GET", url)
    if status in (0, REFUSED):
        raise OSError(f"GET {url} got no answer")  # nothing learnt: ask again later
    if status == 200 and isinstance(body, dict) and body.get("applied") is True:
        return True, body.get("result")
    return (False if status == 404 else None), None


def post_reply(run_id: str, content: str, key: str) -> int:
    return http(
        "POST",
        os.environ["CRASHCERT_REPLY_URL"] + "/replies",
        {"run_id": run_id, "content": content},
        key,
    )[0]


def reply_delivered(key: str) -> bool | None:
    """Asks the sink by key: True/False, None when it cannot be asked (405)."""
    status, _ = http("GET", f"{os.environ['CRASHCERT_REPLY_URL']}/replies/{_q(key)}")
    if status not in (200, 404, 405):
        raise OSError(f"GET /replies answered {status}")  # try again later
    return {200: True, 404: False}.get(status)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def ok(result: Any) -> dict[str, Any]:
    return {"status": "ok", "result": result}


def error(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message}


def unknown() -> dict[str, Any]:
    return {"status": "outcome_unknown", "note": UNKNOWN_NOTE}
