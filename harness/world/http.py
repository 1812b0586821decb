"""A small JSON HTTP server for the world's services, on 127.0.0.1 and a free port.

Routes map a method and a path pattern (`/tools/{name}`) to a handler that takes a
Request and returns a Response. The server never crashes on bad input: bad JSON is a
400, an unknown path a 404, a wrong method a 405, and any handler exception a logged
500, all as JSON errors `{"error": {"message": ..., "type": ...}}`. Stopping does not
wait for hung requests: their threads are daemons and their connections are shut down.

A response may stream as server-sent events (`Response.events`), and a world hook may lose
the response being served (`lose_response`): reset the connection, hold it until the client
gives up, or cut its stream of events. The handler has done its work by then: the effect is
real, only its answer is lost (harness/nemesis/world_trigger.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import logging
import re
import select
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, cast

from harness.world import auth

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_BODY_BYTES = 16 * 1024 * 1024
# An idle keep-alive connection's thread ends after this; clients reconnect transparently.
IDLE_TIMEOUT_S = 120.0
# How quickly serve_forever notices a shutdown request.
POLL_INTERVAL_S = 0.02
# stop() gives the accept loop this long to end; it never waits on request threads.
STOP_JOIN_TIMEOUT_S = 5.0
# A hung response is held until the client closes, the world stops, or this long at most.
HANG_MAX_S = 120.0
HANG_POLL_S = 0.1

_ERROR_TYPES = {
    400: "invalid_request_error",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    500: "server_error",
    503: "service_unavailable",
}


def error_type(status: int) -> str:
    return _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")


def error_body(
    message: str, *, type: str = "invalid_request_error", extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON error every world service answers with, plus service fields (`applied`)."""
    return {"error": {"message": message, "type": type}, **(extra or {})}


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    body: Any
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Set: the response streams these as server-sent events (`data: <json>`, then
    # `data: [DONE]`) and `body` is not sent.
    events: Sequence[Any] | None = None
    # `responses`: each event also names its `type` (`event: ...`) and no [DONE] follows,
    # as the Responses API frames its stream.
    framing: Literal["chat", "responses"] = "chat"


@dataclasses.dataclass(frozen=True)
class Fate:
    """What becomes of a response instead of its delivery. `reset`: the connection is closed
    with RST; `hang`: nothing is sent until the client gives up, then RST; `cut`: a stream of
    events ends cleanly after `after_chunks` of them (None: half of them), always before its
    last one; a response that does not stream is reset instead."""

    how: Literal["reset", "hang", "cut"]
    after_chunks: int | None = None

    def events_sent(self, total: int) -> int:
        """How many of a stream's `total` events leave before the cut."""
        wanted = total // 2 if self.after_chunks is None else self.after_chunks
        return max(0, min(wanted, total - 1))


class Slot:
    """The fate of the response a request thread is serving, when a hook decided one (this
    server's threads, or the thread another server (MCP) serves a request on: `serving`)."""

    fate: Fate | None = None


_serving = threading.local()


@contextlib.contextmanager
def serving(slot: Slot) -> Iterator[None]:
    """While the current thread serves a request whose fate `slot` keeps (lose_response)."""
    _serving.slot = slot
    try:
        yield
    finally:
        _serving.slot = None


def linger_zero(sock: Any) -> None:
    """Make closing `sock` send RST (SO_LINGER 0): the client reads a connection reset."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def lose_response(fate: Fate) -> bool:
    """From a world hook, in the request's thread: the response being served meets `fate`.
    False when this thread serves no request of ours (a JsonServer's, or an MCP tools/call
    run in its slot): nothing here can lose it."""
    slot: Slot | None = getattr(_serving, "slot", None)
    if slot is None:
        return False
    slot.fate = fate
    return True


def error_response(
    status: int,
    message: str,
    *,
    type: str | None = None,
    extra: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    body = error_body(message, type=type or error_type(status), extra=extra)
    return Response(status, body, headers or {})


class HttpError(Exception):
    """Raised by a handler (or the server) to answer with a JSON error."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or error_type(status)
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def response(self) -> Response:
        return error_response(
            self.status, self.message, type=self.type, extra=self.extra, headers=self.headers
        )


class Abandon(Exception):
    """Raised by a handler to close the connection without answering (a hung request)."""


@dataclasses.dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]  # names lower-cased
    body: bytes
    params: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        if not self.body:
            raise HttpError(400, "the request body is empty; expected JSON")
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, ValueError) as error:
            raise HttpError(400, f"the request body is not valid JSON: {error}") from None

    def json_object(self) -> dict[str, Any]:
        value = self.json()
        if not isinstance(value, dict):
            raise HttpError(400, f"the request body must be a JSON object, got {_json_kind(value)}")
        return value


Handler = Callable[[Request], Response]


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    pattern: str  # e.g. "/tools/{name}"; a {placeholder} matches one path segment
    handler: Handler

    def match(self, path: str) -> dict[str, str] | None:
        found = _compile(self.pattern).fullmatch(path)
        if found is None:
            return None
        return {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}


def _compile(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", pattern)
    # re.split alternates literal text and placeholder names.
    regex = "".join(
        re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)"
        for index, part in enumerate(parts)
    )
    return re.compile(regex)


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


class JsonServer:
    """One service on 127.0.0.1:<free port>, serving its routes from daemon threads."""

    def __init__(
        self, name: str, routes: Sequence[Route], *, guard: auth.Guard | None = None
    ) -> None:
        self.name = name
        self.routes = list(routes)
        # Set: only requests whose path starts with the trial's secret are served.
        self.guard = guard
        # Set when stop() begins: waits in handlers (latency, hang) end early.
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"world service {self.name!r} is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        prefix = "" if self.guard is None else self.guard.prefix
        return f"http://{HOST}:{self.port}{prefix}"

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError(f"world service {self.name!r} is already started")
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_S},
            name=f"world-{self.name}",
            daemon=True,
        )
        self._thread.start()
        logger.debug("world service %s listening on %s", self.name, self.url)

    def stop(self) -> None:
        """Stop accepting, cut open connections and return without waiting for handlers."""
        self.stopping.set()
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join(STOP_JOIN_TIMEOUT_S)
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _cut(connection)

    def pause(self, seconds: float) -> bool:
        """Wait `seconds`, cut short by stop(). True when the server is still running."""
        if seconds > 0:
            return not self.stopping.wait(seconds)
        return not self.stopping.is_set()

    def __enter__(self) -> JsonServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def handle(self, request: Request) -> Response:
        """Route one request; every failure becomes a JSON error, never an exception."""
        if self.guard is not None:
            path = self.guard.admit(request.path)
            if path is None:
                self.guard.refuse(self.name, request.method, request.path)
                return error_response(403, auth.REFUSED_MESSAGE)
            request = dataclasses.replace(request, path=path)
        allowed: list[str] = []
        for route in self.routes:
            params = route.match(request.path)
            if params is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            try:
                return route.handler(dataclasses.replace(request, params=params))
            except HttpError as error:
                return error.response()
            except Abandon:
                raise
            except Exception as error:
                logger.exception(
                    "world service %s failed on %s %s", self.name, request.method, request.path
                )
                return error_response(500, f"internal error in the {self.name} service: {error!r}")
        if allowed:
            return error_response(
                405,
                f"{request.method} is not allowed on {request.path}; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        return error_response(404, f"no such path on the {self.name} service: {request.path}")

    def _track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)
        if self.stopping.is_set():
            _cut(connection)

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


def _cut(connection: socket.socket) -> None:
    # shutdown (not close) wakes a thread blocked on the socket; that thread closes it.
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # server_close() must not wait for hung requests
    allow_reuse_address = True

    def __init__(self, app: JsonServer) -> None:
        self.app = app
        super().__init__((HOST, 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls getfqdn(), which can stall on a sandbox's DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name = HOST
        self.server_port = int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("world service %s: connection error", self.app.name, exc_info=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "crashcert-world"
    timeout = IDLE_TIMEOUT_S
    # Headers and body leave in two writes; Nagle plus delayed ACK would add 40 ms to each.
    disable_nagle_algorithm = True

    @property
    def _app(self) -> JsonServer:
        return cast(_Server, self.server).app

    def setup(self) -> None:
        super().setup()
        self._app._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._app._untrack(self.connection)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("world service %s: " + format, self._app.name, *args)

    def _dispatch(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        try:
            body = self._read_body()
        except HttpError as error:
            # The framing of the stream is unknown now: answer and close.
            self.close_connection = True
            self._send(error.response())
            return
        except OSError:
            self.close_connection = True
            return
        request = Request(
            method=self.command,
            path=split.path,
            query=dict(urllib.parse.parse_qsl(split.query)),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        slot = Slot()
        try:
            with serving(slot):
                response = self._app.handle(request)
        except Abandon:
            self.close_connection = True
            return
        if slot.fate is None:
            self._send(response)
        else:
            self._lose(response, slot.fate)

    def _lose(self, response: Response, fate: Fate) -> None:
        self.close_connection = True
        logger.debug("world service %s: response lost (%s)", self._app.name, fate.how)
        if fate.how == "cut" and response.events is not None:
            self._send(response, cut=fate)
            return
        if fate.how == "hang":
            self._hold()
        self._reset()

    def _hold(self) -> None:
        """Send nothing until the client closes (it timed out), the world stops, or
        HANG_MAX_S: the thread never outlives world.stop() by more than a poll."""
        deadline = time.monotonic() + HANG_MAX_S
        while not self._app.stopping.is_set() and time.monotonic() < deadline:
            try:
                readable, _, _ = select.select([self.connection], [], [], HANG_POLL_S)
                if readable and not self.connection.recv(4096):
                    return  # the client closed its end
            except (OSError, ValueError):
                return

    def _reset(self) -> None:
        """Close with RST (SO_LINGER 0): the client reads a connection reset."""
        linger_zero(self.connection)
        self.rfile.close()  # its reference would keep the descriptor open past close()
        self.connection.close()

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked()
        text = self.headers.get("Content-Length")
        if text is None:
            return b""
        try:
            length = int(text)
        except ValueError:
            raise HttpError(400, f"invalid Content-Length header: {text!r}") from None
        if length < 0:
            raise HttpError(400, f"invalid Content-Length header: {text!r}")
        if length > MAX_BODY_BYTES:
            raise HttpError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HttpError(400, "malformed chunked request body") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
            chunks.append(self.rfile.read(size))
            self.rfile.readline(8)  # the CRLF after the chunk
        while self.rfile.readline(1024).strip():  # trailers, up to the blank line
            pass
        return b"".join(chunks)

    def _send(self, response: Response, *, cut: Fate | None = None) -> None:
        if response.events is not None:
            self._stream(response, cut)
            return
        try:
            data = json.dumps(response.body).encode()
            status = response.status
        except (TypeError, ValueError) as error:
            logger.exception("world service %s: response is not JSON", self._app.name)
            body = error_body(f"response is not JSON: {error}", type="server_error")
            data, status = json.dumps(body).encode(), 500
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as error:
            # The client is gone (killed while a hook held the response): nothing to do.
            self.close_connection = True
            logger.debug("world service %s: response not delivered: %s", self._app.name, error)

    def _stream(self, response: Response, cut: Fate | None) -> None:
        """Server-sent events in HTTP/1.1 chunks; a cut ends the body cleanly early, so the
        client sees a stream that just stops (no error, no [DONE])."""
        named = response.framing == "responses"
        events = [_event(event, named) for event in response.events or ()]
        if cut is not None:
            events = events[: cut.events_sent(len(events))]
        elif not named:
            events.append(b"data: [DONE]\n\n")
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for event in events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError as error:
            self.close_connection = True
            logger.debug("world service %s: stream not delivered: %s", self._app.name, error)


def _event(event: Any, named: bool) -> bytes:
    head = f"event: {event['type']}\n" if named else ""
    return f"{head}data: {json.dumps(event)}\n\n".encode()


class Service:
    """A world service on its own loopback port: subclasses set `_server` and routes."""

    _server: JsonServer

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()
