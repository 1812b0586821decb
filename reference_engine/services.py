"""Tools and reply sink over HTTP (harness/CONTRACT.md section 3), with the engine's
retry rules. Nothing here touches the database; callers record what comes back."""

from __future__ import annotations

import dataclasses
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from reference_engine import errors

if TYPE_CHECKING:
    from reference_engine import mcp_tools


class NotSent(Exception):
    """The request never reached the service (connection refused): safe to retry."""


class NoAnswer(Exception):
    """The request may have reached the service, but no answer came back."""


@dataclasses.dataclass(frozen=True)
class Reply:
    status_code: int
    body: dict[str, Any]


def _request(
    method: str,
    url: str,
    *,
    timeout_s: float,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Reply(response.status, _json(response.read()))
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, _json(error.read()))
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError | socket.gaierror):
            raise NotSent(str(error.reason)) from None
        raise NoAnswer(str(error.reason)) from None
    except (TimeoutError, ConnectionError, http.client.HTTPException, OSError) as error:
        raise NoAnswer(f"{type(error).__name__}: {error}") from None


@dataclasses.dataclass(frozen=True)
class ToolResult:
    state: str  # succeeded | failed | outcome_unknown
    outcome: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Backoff:
    first_ms: int
    max_ms: int
    limit: int  # retries after the first try

    def delays(self) -> list[float]:
        return [min(self.first_ms * 2**i, self.max_ms) / 1000.0 for i in range(self.limit)]


class Services:
    def __init__(
        self,
        *,
        tools_url: str | None,
        reply_url: str | None,
        timeout_s: float,
        backoff: Backoff,
        stopping: threading.Event | None = None,
        tools_mcp_url: str | None = None,
    ) -> None:
        self.tools_url = (tools_url or "").rstrip("/")
        # Tools over MCP when the world serves them there (imported only then: `mcp` is an
        # optional extra); the retry rules below are the same for both transports.
        self._mcp: mcp_tools.McpTools | None = None
        if tools_mcp_url:
            from reference_engine import mcp_tools

            self._mcp = mcp_tools.McpTools(tools_mcp_url, timeout_s=timeout_s)
        self.reply_url = (reply_url or "").rstrip("/")
        self.backoff = backoff
        self.stopping = stopping or threading.Event()
        self.timeout_s = timeout_s

    def close(self) -> None:
        pass

    def _get(self, url: str) -> Reply:
        return _request("GET", url, timeout_s=self.timeout_s)

    def _post(self, url: str, body: bytes, key: str) -> Reply:
        return _request(
            "POST", url, timeout_s=self.timeout_s, body=body, headers={"Idempotency-Key": key}
        )

    def _call_tool(self, name: str, body: bytes, key: str) -> Reply:
        if self._mcp is not None:
            return self._mcp.call(name, body, key)
        return self._post(f"{self.tools_url}/tools/{name}", body, key)

    def _query_tool(self, name: str, key: str) -> Reply:
        if self._mcp is not None:
            return self._mcp.query(name, key)
        return self._get(f"{self.tools_url}/tools/{name}/effects/{key}")

    def _sleep(self, seconds: float) -> None:
        # bounded wait; a SIGTERM does not cut a retry short (the transition must finish)
        time.sleep(seconds)

    # -- tools ---------------------------------------------------------------------------

    def declarations(self) -> dict[str, dict[str, Any]]:
        if not self.tools_url and self._mcp is None:
            return {}
        last: Exception | None = None
        for delay in [0.0, *self.backoff.delays()]:
            self._sleep(delay)
            try:
                response = self._mcp.list() if self._mcp else self._get(f"{self.tools_url}/tools")
            except (NotSent, NoAnswer) as error:
                last = error
                continue
            if response.status_code >= 500:
                last = errors.WorldError(f"GET /tools answered {response.status_code}")
                continue
            try:
                tools = response.body["tools"]
                return {tool["function"]["name"]: tool for tool in tools}
            except (ValueError, KeyError, TypeError) as error:
                raise errors.WorldError(f"GET /tools answered an unusable body: {error}") from None
        raise errors.ServiceUnavailable(f"tool listing unavailable: {last}")

    def run_tool(
        self, name: str, arguments: str, key: str, declaration: dict[str, Any]
    ) -> ToolResult:
        """POST with the call's key, retrying only where the rules allow it."""
        replayable = declaration.get("replay") == "replayable"
        queryable = bool(declaration.get("queryable"))
        maybe_applied = False
        last_error = "no attempt made"
        for delay in [0.0, *self.backoff.delays()]:
            self._sleep(delay)
            try:
                response = self._call_tool(name, arguments.encode(), key)
            except NotSent as error:
                last_error = f"cannot connect: {error}"  # never sent: safe to try again
                continue
            except NoAnswer as error:
                last_error = f"no answer: {error}"
                maybe_applied = True
            else:
                body = response.body
                if response.status_code == 200:
                    return ToolResult("succeeded", {"result": body.get("result")})
                if response.status_code == 503 and body.get("applied") is False:
                    last_error = f"503 not applied: {_message(body)}"
                    continue
                if 400 <= response.status_code < 500:
                    return ToolResult(
                        "failed", {"error": _message(body), "status": response.status_code}
                    )
                last_error = f"{response.status_code}: {_message(body)}"
                maybe_applied = True
            # the request may have been applied
            if replayable and self._redeployed(name, declaration):
                # never replayed under a new version (CONTRACT.md section 2, tool.started)
                replayable = False
            if replayable:
                continue
            if queryable:
                found = self.query_effect(name, key)
                if found is not None and found.state == "succeeded":
                    return found
                if found is not None:  # not applied: the same key may be sent again
                    maybe_applied = False
                    continue
            return ToolResult("outcome_unknown", {"error": last_error})
        if maybe_applied:
            return ToolResult("outcome_unknown", {"error": f"gave up: {last_error}"})
        # Never applied, but not refused by the tool either: the link is down. Settling the
        # call `failed` would tell the model a refund it needed cannot be done, and end the
        # run as if it had (tool.at_least_once); the run is given back and tried later, and
        # the call is sent again with its key (CONTRACT.md section 5, links).
        raise errors.ServiceUnavailable(f"tool {name} unreachable: {last_error}")

    def _redeployed(self, name: str, declaration: dict[str, Any]) -> bool:
        """Whether the tool's fingerprint changed since the call was started with
        `declaration` (a listing that cannot be read counts as changed)."""
        try:
            current = self.declarations().get(name)
        except (errors.ServiceUnavailable, errors.WorldError):
            return True
        return current is None or current.get("fingerprint") != declaration.get("fingerprint")

    def query_effect(self, name: str, key: str) -> ToolResult | None:
        """GET effects/{key}: succeeded (applied), failed (not applied) or None (cannot tell)."""
        for delay in [0.0, *self.backoff.delays()]:
            self._sleep(delay)
            try:
                response = self._query_tool(name, key)
            except (NotSent, NoAnswer):
                continue
            body = response.body
            if response.status_code == 200 and body.get("applied") is True:
                return ToolResult("succeeded", {"result": body.get("result"), "queried": True})
            if response.status_code == 404:
                return ToolResult("failed", {"error": "not applied", "queried": True})
            if response.status_code >= 500:
                continue
            return None
        return None

    # -- reply sink ----------------------------------------------------------------------

    def send_reply(self, run_id: str, content: str, key: str) -> str:
        """POST /replies: `sent`, `not_sent` (never left) or `unknown`. A refused
        connection is tried again (nothing left, so nothing can arrive twice): a sink
        that cannot be asked by key would otherwise end the run delivery_uncertain for a
        reply known never to have left (sink_cut). Anything that may have left is sent once."""
        body = json.dumps({"run_id": run_id, "content": content}).encode()
        for delay in [0.0, *self.backoff.delays()]:
            self._sleep(delay)
            try:
                response = self._post(f"{self.reply_url}/replies", body, key)
            except NotSent:
                continue
            except NoAnswer:
                return "unknown"
            break
        else:
            return "not_sent"
        if 200 <= response.status_code < 300:
            return "sent"
        if response.status_code in (400, 422):
            raise errors.WorldError(f"reply sink refused the reply: {_message(response.body)}")
        return "unknown"

    def query_reply(self, key: str) -> int | None:
        """GET /replies/{key}: the status code, or None when the sink cannot be reached."""
        for delay in [0.0, *self.backoff.delays()]:
            self._sleep(delay)
            try:
                response = self._get(f"{self.reply_url}/replies/{key}")
            except (NotSent, NoAnswer):
                continue
            if response.status_code >= 500:
                continue
            return response.status_code
        return None


def _json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error) if error is not None else "no detail"
