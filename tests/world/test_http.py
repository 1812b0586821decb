"""The JSON HTTP server base every world service runs on."""

from __future__ import annotations

import concurrent.futures
import http.client
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from harness.world import http as json_http
from tests import fix_world


@pytest.fixture
def server() -> Iterator[json_http.JsonServer]:
    def echo(request: json_http.Request) -> json_http.Response:
        return json_http.Response(200, {"got": request.json(), "params": dict(request.params)})

    def broken(request: json_http.Request) -> json_http.Response:
        raise ValueError("handler bug")

    def slow(request: json_http.Request) -> json_http.Response:
        if not app.pause(30):
            raise json_http.Abandon()
        return json_http.Response(200, {})

    app = json_http.JsonServer(
        "test",
        [
            json_http.Route("POST", "/echo/{name}", echo),
            json_http.Route("GET", "/broken", broken),
            json_http.Route("GET", "/slow", slow),
        ],
    )
    with app:
        yield app


def test_routes_with_params(server: json_http.JsonServer, http_json: fix_world.JsonClient) -> None:
    reply = http_json.post(f"{server.url}/echo/a%20b", {"x": 1})

    assert reply.status == 200
    assert reply.body == {"got": {"x": 1}, "params": {"name": "a b"}}


def test_a_handler_exception_is_a_logged_500(
    server: json_http.JsonServer,
    http_json: fix_world.JsonClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger=json_http.__name__):
        reply = http_json.get(f"{server.url}/broken")

    assert reply.status == 500
    assert reply.body["error"]["type"] == "server_error"
    assert "handler bug" in reply.body["error"]["message"]
    assert "failed on GET /broken" in caplog.text
    assert http_json.post(f"{server.url}/echo/x", {}).status == 200


def test_unknown_path_wrong_method_and_bad_json(
    server: json_http.JsonServer, http_json: fix_world.JsonClient
) -> None:
    assert http_json.get(f"{server.url}/nope").status == 404
    wrong = http_json.get(f"{server.url}/echo/x")
    assert (wrong.status, wrong.headers["Allow"]) == (405, "POST")
    bad = http_json.post(f"{server.url}/echo/x", raw=b"\xff\xfe")
    assert bad.status == 400
    empty = http_json.post(f"{server.url}/echo/x", raw=b"")
    assert "empty" in empty.body["error"]["message"]


def test_chunked_body_and_bad_content_length(server: json_http.JsonServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("POST", "/echo/c", body=iter([b'{"a":', b" 2}"]), encode_chunked=True)
    response = connection.getresponse()
    assert (response.status, response.read()) == (
        200,
        b'{"got": {"a": 2}, "params": {"name": "c"}}',
    )
    connection.close()

    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"POST /echo/c HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n")
        answer = raw.makefile("rb").read()  # the server closes: the stream is unframed
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"invalid Content-Length" in answer


def test_garbage_on_the_socket_does_not_stop_the_server(
    server: json_http.JsonServer, http_json: fix_world.JsonClient
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"\x00\x01 not http at all\r\n\r\n")
        raw.recv(4096)

    assert http_json.post(f"{server.url}/echo/x", {}).status == 200


def test_stop_cuts_waiting_handlers_and_idle_connections(
    server: json_http.JsonServer, http_json: fix_world.JsonClient
) -> None:
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    idle.request("POST", "/echo/x", body=b"{}")
    assert idle.getresponse().read()  # a kept-alive connection now idles on the server

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(http_json.get, f"{server.url}/slow", timeout=30)
        fix_world.wait_for(lambda: len(server._connections) == 2, what="two open connections")
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 2.0
        with pytest.raises(OSError):
            slow.result(5)

    # The idle connection was shut down too: nothing is served after stop().
    with pytest.raises((OSError, http.client.HTTPException)):
        idle.request("POST", "/echo/x", body=b"{}")
        idle.getresponse()
    idle.close()


def test_stop_is_idempotent_and_start_twice_is_an_error() -> None:
    server = json_http.JsonServer("test", [])
    server.stop()  # never started: nothing to do
    server.start()
    with pytest.raises(RuntimeError, match="already started"):
        server.start()
    server.stop()
    server.stop()
    assert not server.pause(0)
