"""The world's tools over MCP: the same ToolServices, served by the official `mcp` package.

A scenario with `tools_transport: mcp` gets this server (Streamable HTTP, stateless, JSON
responses) on 127.0.0.1 and a free port, at `/mcp`, run by uvicorn on a thread of its own.
Every call goes through ToolServices.call and query, so the ledger, the scripted
behaviours and the `tool_effect_applied` hook are those of HTTP (CONTRACT.md section 3,
"Tools over MCP"):

- `tools/list`: each tool's declaration, its crashcert policy (replay, effect, queryable,
  honours_idempotency_key, requires_approval, fingerprint) in `_meta["crashcert"]`.
- `tools/call`: the idempotency key in the request's `_meta["idempotency_key"]`. The result's
  `structuredContent` (and its one text block) is the body HTTP would answer plus `status`,
  the HTTP status it would have had; `isError` unless that status is 200.
- `resources/read` of `crashcert://tools/{tool}/effects/{key}` (both percent-encoded): the
  query by key, as a JSON text with `status` (200 applied, 404 not, 405 not queryable).

The `mcp` package is an optional extra (`crashcert[mcp]`): imported only by a world that
serves MCP.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
import mcp_types
import uvicorn
from mcp.server import context as mcp_context
from mcp.server import lowlevel

from harness.world import auth, http, tools

logger = logging.getLogger(__name__)

PATH = "/mcp"
KEY_META = "idempotency_key"  # tools/call `_meta` entry holding the idempotency key
POLICY_META = "crashcert"  # tools/list `_meta` entry holding the crashcert policy
QUERY_SCHEME = "crashcert"
QUERY_TEMPLATE = "crashcert://tools/{tool}/effects/{key}"
# Open connections (a killed worker's, a hung call's) get this long once stop() is asked;
# then they are cut. stop() waits at most STOP_JOIN_TIMEOUT_S for the server's thread.
GRACE_S = 1
STOP_JOIN_TIMEOUT_S = 5.0

Context = mcp_context.ServerRequestContext[Any, Any]
Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Any, Any], Awaitable[None]]


def query_uri(tool: str, key: str) -> str:
    quote = urllib.parse.quote
    return f"{QUERY_SCHEME}://tools/{quote(tool, safe='')}/effects/{quote(key, safe='')}"


def parse_query_uri(uri: str) -> tuple[str, str] | None:
    """(tool, key) of a query URI, or None if it is not one."""
    split = urllib.parse.urlsplit(uri)
    parts = split.path.split("/")
    if split.scheme != QUERY_SCHEME or split.netloc != "tools" or len(parts) != 4:
        return None
    _, tool, effects, key = parts
    if effects != "effects" or not tool or not key:
        return None
    return urllib.parse.unquote(tool), urllib.parse.unquote(key)


def declaration_to_tool(declaration: dict[str, Any]) -> mcp_types.Tool:
    """A `GET /tools` entry as an MCP tool (the client side inverts it)."""
    function = declaration["function"]
    policy = {k: v for k, v in declaration.items() if k not in ("type", "function")}
    return mcp_types.Tool(
        name=function["name"],
        description=function.get("description") or None,
        input_schema=function["parameters"],
        annotations=mcp_types.ToolAnnotations(
            read_only_hint=declaration["effect"] == "read",
            idempotent_hint=declaration["replay"] == "replayable",
        ),
        _meta={POLICY_META: policy},
    )


def _guarded(app: Asgi, guard: auth.Guard) -> Asgi:
    """The app behind the trial's secret: a request without it is refused (403) and
    recorded before the MCP server sees it."""

    async def guarded(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan: the server's own start and stop
            await app(scope, receive, send)
            return
        path = guard.admit(str(scope["path"]))
        if path is None:
            guard.refuse("tools-mcp", str(scope.get("method", "")), str(scope["path"]))
            data = json.dumps(http.error_body(auth.REFUSED_MESSAGE, type="permission_denied"))
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": data.encode()})
            return
        await app({**scope, "path": path, "raw_path": path.encode()}, receive, send)

    return guarded


# The fate of the HTTP request being served, seen by its tools/call handler (the MCP
# server's tasks for a request run in a copy of the request's context).
_request_slot: contextvars.ContextVar[http.Slot | None] = contextvars.ContextVar(
    "crashcert_mcp_slot", default=None
)


def _losing(app: Asgi, stopping: threading.Event) -> Asgi:
    """The app, with each request's response lost when a world hook says so while its
    tools/call runs (response_lost over MCP): the effect is real, nothing of the answer
    leaves. `reset` aborts the connection with RST; `hang` holds it until the client gives up,
    the world stops, or http.HANG_MAX_S, then resets it."""

    async def losing(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        slot = http.Slot()
        token = _request_slot.set(slot)

        async def send_or_lose(message: MutableMapping[str, Any]) -> None:
            if slot.fate is None:
                await send(message)
                return
            if message["type"] == "http.response.start":
                await _lose(send, slot.fate, stopping)
            # nothing of a lost response leaves, not even its body

        try:
            await app(scope, receive, send_or_lose)
        finally:
            _request_slot.reset(token)

    return losing


async def _lose(send: Any, fate: http.Fate, stopping: threading.Event) -> None:
    # uvicorn's `send` is a method of the request's cycle, which holds the connection.
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        logger.warning("MCP response to lose, but no transport to reset: sent nothing")
        return
    logger.debug("world service tools (MCP): response lost (%s)", fate.how)
    if fate.how == "hang":
        deadline = time.monotonic() + http.HANG_MAX_S
        while not (transport.is_closing() or stopping.is_set() or time.monotonic() >= deadline):
            await anyio.sleep(http.HANG_POLL_S)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        http.linger_zero(sock)
    transport.abort()
    # Let the loop run the connection's loss, so uvicorn sees a client gone (no 500 to
    # send, no "returned without starting response") when the app returns.
    await anyio.sleep(0)


def _body(response: http.Response) -> dict[str, Any]:
    body = response.body if isinstance(response.body, dict) else {"result": response.body}
    return {"status": response.status, **body}


class McpToolServer:
    """`tools` over MCP on 127.0.0.1:<free port>; start() and stop() like a JsonServer."""

    def __init__(self, services: tools.ToolServices, *, guard: auth.Guard | None = None) -> None:
        self.services = services
        self.guard = guard
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        self._stopping = threading.Event()  # ends a held (hang) response

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("the MCP tool server is not started")
        prefix = "" if self.guard is None else self.guard.prefix
        return f"http://{http.HOST}:{self._port}{prefix}{PATH}"

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the MCP tool server is already started")
        app = lowlevel.Server(
            "crashcert-world-tools",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
        ).streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True, host=http.HOST
        )
        losing = _losing(app, self._stopping)
        served: Any = losing if self.guard is None else _guarded(losing, self.guard)
        # Bound and listening before the thread starts: a client that comes early waits in
        # the backlog instead of being refused, so start() need not wait for uvicorn.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((http.HOST, 0))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        self._port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            served,
            log_config=None,  # leave the harness's logging as it is; uvicorn's logs propagate
            log_level="warning",
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=GRACE_S,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._serve, args=(self._server, sock), name="world-tools-mcp", daemon=True
        )
        self._thread.start()
        logger.debug("world service tools (MCP) listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving without waiting for open requests (hung ones end with the world).
        Idempotent."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.should_exit = True
        thread.join(STOP_JOIN_TIMEOUT_S)
        if thread.is_alive():
            logger.warning("the MCP tool server did not stop within %ss", STOP_JOIN_TIMEOUT_S)

    @staticmethod
    def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            server.run(sockets=[sock])
        except Exception:
            logger.exception("the MCP tool server failed")
        finally:
            sock.close()

    # -- handlers (the server's event loop; tool work runs on a worker thread) -------------

    async def _list_tools(
        self, ctx: Context, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        declarations = self.services.declarations()
        return mcp_types.ListToolsResult(tools=[declaration_to_tool(d) for d in declarations])

    async def _call_tool(
        self, ctx: Context, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        key = (params.meta or {}).get(KEY_META)
        arguments = {} if params.arguments is None else params.arguments
        # Latency, hangs and hooks block: a thread keeps the loop serving other calls. The
        # thread serves in the request's slot, so a hook can have its response lost.
        slot = _request_slot.get()

        def call() -> http.Response:
            with contextlib.nullcontext() if slot is None else http.serving(slot):
                return self.services.call(
                    params.name, key if isinstance(key, str) and key else None, arguments
                )

        response = await anyio.to_thread.run_sync(call)
        body = _body(response)
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=json.dumps(body))],
            structured_content=body,
            is_error=response.status != 200,
        )

    async def _list_templates(
        self, ctx: Context, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourceTemplatesResult:
        template = mcp_types.ResourceTemplate(
            name="tool_effect",
            uri_template=QUERY_TEMPLATE,
            description="Was this idempotency key applied by this tool? (status 200 or 404)",
            mime_type="application/json",
        )
        return mcp_types.ListResourceTemplatesResult(resource_templates=[template])

    async def _read_resource(
        self, ctx: Context, params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        parsed = parse_query_uri(str(params.uri))
        if parsed is None:
            body = _body(http.error_response(404, f"no such resource: {params.uri}"))
        else:
            try:
                response = await anyio.to_thread.run_sync(self.services.query, *parsed)
            except http.HttpError as error:
                response = error.response()
            body = _body(response)
        contents = mcp_types.TextResourceContents(
            uri=str(params.uri), mime_type="application/json", text=json.dumps(body)
        )
        return mcp_types.ReadResourceResult(contents=[contents])
