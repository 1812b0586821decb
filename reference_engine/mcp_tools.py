"""Tools over MCP, for a world that serves them there (harness/CONTRACT.md section 3,
"Tools over MCP").

Each operation is one short Streamable HTTP session of the official `mcp` client: connect,
initialize, then the one request. The answers are made to look like the HTTP ones
(services.Reply: status and body), so Services keeps one set of retry rules:

- `tools/list`: each tool back to its `GET /tools` declaration, policy from
  `_meta["crashcert"]`;
- `tools/call`: the idempotency key in `_meta["idempotency_key"]`; the result's structured
  content carries `status` and the body HTTP would have answered;
- the query by key: `resources/read` of `crashcert://tools/{tool}/effects/{key}`.

A failure before the request itself was sent (connection refused, the handshake) is
services.NotSent; one after it is services.NoAnswer: the call may have been applied.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import mcp
from mcp.client import streamable_http

from reference_engine import services

KEY_META = "idempotency_key"
POLICY_META = "crashcert"


def query_uri(tool: str, key: str) -> str:
    quote = urllib.parse.quote
    return f"crashcert://tools/{quote(tool, safe='')}/effects/{quote(key, safe='')}"


def declaration(tool: mcp.types.Tool) -> dict[str, Any]:
    """The MCP tool as the HTTP listing declares it, so fingerprints compare across both."""
    policy = (tool.meta or {}).get(POLICY_META) or {}
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.input_schema,
        },
        **policy,
    }


class McpTools:
    def __init__(self, url: str, *, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def list(self) -> services.Reply:
        async def listing(session: mcp.ClientSession) -> services.Reply:
            tools: list[mcp.types.Tool] = []
            cursor: str | None = None
            while True:
                page = await session.list_tools(
                    params=mcp.types.PaginatedRequestParams(cursor=cursor)
                )
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return services.Reply(200, {"tools": [declaration(t) for t in tools]})

        return self._run(listing)

    def call(self, name: str, body: bytes, key: str) -> services.Reply:
        try:
            arguments = json.loads(body)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            # MCP carries arguments as an object; HTTP would have answered 400 the same way.
            return services.Reply(400, {"error": {"message": "arguments are not a JSON object"}})

        async def calling(session: mcp.ClientSession) -> services.Reply:
            # an open map on the wire; the SDK's TypedDict names only the reserved keys
            meta = cast(mcp.types.RequestParamsMeta, self.request_meta(key))
            result = await session.call_tool(name, arguments, meta=meta)
            return _reply(result.structured_content)

        return self._run(calling)

    def request_meta(self, key: str) -> dict[str, Any]:
        """The `_meta` of a tools/call: where the idempotency key goes."""
        return {KEY_META: key}

    def query(self, name: str, key: str) -> services.Reply:
        async def reading(session: mcp.ClientSession) -> services.Reply:
            result = await session.read_resource(query_uri(name, key))
            text = next((c.text for c in result.contents if hasattr(c, "text")), "")
            try:
                return _reply(json.loads(text))
            except ValueError:
                return services.Reply(502, {})

        return self._run(reading)

    def _run(
        self, operation: Callable[[mcp.ClientSession], Awaitable[services.Reply]]
    ) -> services.Reply:
        return asyncio.run(self._session(operation))

    async def _session(
        self, operation: Callable[[mcp.ClientSession], Awaitable[services.Reply]]
    ) -> services.Reply:
        sent = False
        reply: services.Reply | None = None
        try:
            with anyio.fail_after(self.timeout_s):
                async with (
                    streamable_http.streamable_http_client(self.url) as (read, write),
                    mcp.ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    sent = True
                    reply = await operation(session)
        except Exception as error:
            if reply is not None:  # answered; only closing the session failed
                return reply
            detail = f"{type(error).__name__}: {error}"
            raise (services.NoAnswer if sent else services.NotSent)(detail) from None
        assert reply is not None
        return reply


def _reply(content: Any) -> services.Reply:
    """A structured answer `{"status": ..., **body}` as the HTTP reply it stands for."""
    if not isinstance(content, dict) or not isinstance(content.get("status"), int):
        return services.Reply(502, {"error": {"message": f"unusable MCP answer: {content!r}"}})
    body = {k: v for k, v in content.items() if k != "status"}
    return services.Reply(content["status"], body)
