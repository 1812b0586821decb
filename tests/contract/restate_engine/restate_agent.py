"""An agent loop on Restate (https://github.com/restatedev/sdk-python), written from
harness/CONTRACT.md: a third-party engine whose durable store is the Restate server, not
our Postgres, certified in black-box mode.

One Workflow invocation per run, keyed by the run id (restate_steps.py): the server's
journal of that invocation is the only durable state; the run report is its output.

    python restate_agent.py migrate | worker | submit | status RUN_ID

A worker serves the service endpoint (the SDK's ASGI app under Hypercorn, on loopback) and
dials the front (RESTATE_TUNNEL, through the worker's own Toxiproxy proxy), keeping idle
connections there that the front splices the server's HTTP/2 connections onto
(restate_front.py says why a front and not a deployment per worker). `submit` and `status`
speak HTTP to the same address, which the front hands to the server's ingress.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import restate_front

SERVICE = "AgentRun"
IDLE = 2  # idle connections each worker keeps at the front
CONNECT_PAUSE_S = 0.1
TERM_EXIT_S = 0.5
SUBMIT_TRIES = 300  # the deployment is registered once a worker reached the front


def log(message: str) -> None:
    """One line on stderr, which the harness keeps as this worker's log."""
    print(f"restate_agent {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _tunnel() -> tuple[str, int]:
    host, _, port = os.environ["RESTATE_TUNNEL"].rpartition(":")
    return host, int(port)


async def _serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes, local: int
) -> None:
    try:
        endpoint = await asyncio.open_connection(restate_front.HOST, local)
    except OSError:
        writer.close()
        return
    endpoint[1].write(first)
    await restate_front.splice((reader, writer), endpoint)


async def _keep_idle(worker_id: str, local: int) -> None:
    """One idle connection at the front at a time; once the front uses it, another."""
    host, port = _tunnel()
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(restate_front.GREETING + worker_id.encode() + b"\n")
            await writer.drain()
            first = await reader.read(restate_front.CHUNK)
        except (ConnectionError, OSError):
            first = b""
        if not first:  # refused, reset or closed before use (a cut link): again
            await asyncio.sleep(CONNECT_PAUSE_S)
            continue
        restate_front.spawn(_serve_one(reader, writer, first, local))


async def worker() -> None:
    import hypercorn.asyncio
    import hypercorn.config
    import restate
    import restate.server
    import restate_steps

    identity = os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}"
    with socket.socket() as probe:  # a free loopback port for the endpoint
        probe.bind((restate_front.HOST, 0))
        local = probe.getsockname()[1]
    config = hypercorn.config.Config()
    config.bind = [f"{restate_front.HOST}:{local}"]
    config.h2_max_concurrent_streams = 2**31 - 1
    config.keep_alive_timeout = 2**31 - 1
    config.accesslog = None
    app = restate.app(services=[restate_steps.agent])
    # SIGTERM (a deploy's stop): the SDK's own hook asks in-flight invocations to suspend
    # (the server retries them elsewhere); the worker exits shortly after.
    loop = asyncio.get_running_loop()
    restate.server.install_shutdown_hook(loop, lambda: loop.call_later(TERM_EXIT_S, os._exit, 0))
    log(f"worker {identity} serving on {local} (keys: {restate_steps.keys()})")
    await asyncio.gather(
        # A trigger that never fires: Hypercorn installs no signal handlers, so SIGTERM
        # ends the worker at once (a deploy's stop), as the default handler does.
        hypercorn.asyncio.serve(app, config, shutdown_trigger=asyncio.Event().wait),  # type: ignore[arg-type]
        *(_keep_idle(identity, local) for _ in range(IDLE)),
    )


def _http(method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{os.environ['RESTATE_TUNNEL']}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"null")
        except ValueError:
            return error.code, raw.decode(errors="replace")


def _quoted(key: str) -> str:
    return urllib.parse.quote(key, safe="")


def submit() -> None:
    payload = json.loads(sys.stdin.read())
    # Hardened: the client's run key is the workflow's key, and Restate runs a workflow
    # once per key (a second send answers the run the key has). Naive: a fresh id.
    if os.environ.get("RESTATE_AGENT_KEYS") == "derived":
        run_id = payload["run_key"]
    else:
        run_id = f"run-{uuid.uuid4().hex[:12]}"
    for attempt in range(SUBMIT_TRIES):
        try:
            status, answer = _http("POST", f"/{SERVICE}/{_quoted(run_id)}/run/send", payload)
        except (urllib.error.URLError, OSError) as error:
            status, answer = 0, str(error)
        if status in (200, 202):
            print(json.dumps({"run_id": run_id}))
            return
        if attempt == SUBMIT_TRIES - 1:
            raise SystemExit(f"submit failed: {status} {answer}")
        time.sleep(CONNECT_PAUSE_S)  # not registered yet (404), or the server starting


def status(run_id: str) -> None:
    report: dict[str, Any] = {
        "run_id": run_id, "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"},
        "status": "running",
    }  # fmt: skip
    code, answer = _http("GET", f"/restate/workflow/{SERVICE}/{_quoted(run_id)}/output")
    if code == 200 and isinstance(answer, dict) and "run_id" in answer:
        report = answer
    elif 400 <= code < 500 and code not in (404, 470):
        report["status"] = "failed"  # a terminal error: the run ended without a report
    print(json.dumps(report))


def main(argv: list[str]) -> None:
    command = argv[1]
    if command == "migrate":
        return  # the Restate server is the store: nothing to create in Postgres
    if command == "worker":
        asyncio.run(worker())
    elif command == "submit":
        submit()
    elif command == "status":
        status(argv[2])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
