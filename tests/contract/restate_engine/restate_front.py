"""The Restate side of one trial, the `server:` the lab starts: the Restate server itself
(npm @restatedev/restate-server, installed by ci/bootstrap.sh), and the front an operator
puts before a service's replicas, the address registered as the service's one deployment.

Restate is a push model: the server opens the HTTP/2 connection to a deployment and runs an
invocation on that stream. Its docs scale a service by registering one deployment URL
served by several replicas behind a load balancer; an in-flight invocation retried after its
replica died reaches another replica there. A deployment per worker would not do: an
invocation stays on the deployment it started on, so one begun on a killed worker would
wait for that worker forever.

The service is registered before any worker runs (the lab submits the run first): the front
answers the server's discovery request from the service's own manifest (the SDK's app,
imported here, serving discovery and nothing else), and any other request that finds no
worker gets 503, which the server retries, on a connection closed soon after.

The front is that load balancer, turned around so each worker's link passes its own
Toxiproxy proxy (the lab's store links, harness/lab/store_links.py): every worker dials
the front's tunnel port (RESTATE_TUNNEL, through its proxy) and keeps idle connections
there; each connection the server opens to the deployment port is spliced to one idle
worker connection. A worker killed, or its link reset, closes the server's connection:
the server retries the invocation and the front hands it to a live worker. A connection
to the tunnel port that does not open with the tunnel greeting is a client's (submit,
status): spliced to the server's ingress.

    python restate_front.py --ingress P --admin P --node P --front P --tunnel P
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import typing
import urllib.error
import urllib.request

VERSION = "1.7.12"
GREETING = b"CRASHCERT-TUNNEL "
HOST = "127.0.0.1"
IDLE_WAIT_S = 0.2
# How long a connection answered without a worker stays open: the server pools HTTP/2
# connections, and must open a new one (to a worker) for the retry.
FALLBACK_S = 1.0
CHUNK = 65536
# Short, so a trial's stalled stream is given up and retried in seconds, not minutes.
SERVER_ENV = {
    "RESTATE_LISTEN_MODE": "tcp",
    "RESTATE_DISABLE_TELEMETRY": "true",
    "RESTATE_DEFAULT_NUM_PARTITIONS": "1",
    "RESTATE_LOG_FILTER": "warn",
    "RESTATE_WORKER__INVOKER__INACTIVITY_TIMEOUT": "2s",
    "RESTATE_WORKER__INVOKER__ABORT_TIMEOUT": "2s",
    "RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL": "100ms",
    "RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL": "1s",
}


def find_server() -> str | None:
    """The restate-server binary: RESTATE_SERVER_BIN, the bootstrap's npm install, PATH."""
    named = os.environ.get("RESTATE_SERVER_BIN")
    cached = pathlib.Path.home() / ".cache" / "crashcert" / f"restate-{VERSION}"
    # The platform package's binary itself, not node_modules/.bin's node launcher (which
    # would stand between a SIGKILL and the server).
    binary = cached / "node_modules" / "@restatedev" / "restate-server-linux-x64" / "bin"
    for candidate in (named, str(binary / "restate-server")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("restate-server")


# Tasks started and not awaited, held so the loop does not drop them.
RUNNING: set[asyncio.Future[None]] = set()


def spawn(coroutine: typing.Coroutine[typing.Any, typing.Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    RUNNING.add(task)
    task.add_done_callback(RUNNING.discard)


def log(message: str) -> None:
    print(f"restate_front {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Bytes both ways until either side closes; then both are closed."""
    _, pending = await asyncio.wait(
        [asyncio.ensure_future(pipe(a[0], b[1])), asyncio.ensure_future(pipe(b[0], a[1]))],
        return_when=asyncio.FIRST_COMPLETED,
    )
    a[1].close()
    b[1].close()
    for task in pending:
        task.cancel()


class Front:
    def __init__(self, ports: argparse.Namespace) -> None:
        self.ports = ports
        self.idle: collections.deque[tuple[str, asyncio.StreamReader, asyncio.StreamWriter]] = (
            collections.deque()
        )
        self.arrived = asyncio.Event()

    async def tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A worker's idle connection (kept until paired or closed), or a client's."""
        try:
            head = await reader.readexactly(len(GREETING))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        if head != GREETING:
            try:
                ingress = await asyncio.open_connection(HOST, self.ports.ingress)
            except OSError:
                writer.close()
                return
            ingress[1].write(head)
            await splice((reader, writer), ingress)
            return
        worker = (await reader.readline()).decode().strip()
        self.idle.append((worker, reader, writer))
        self.arrived.set()

    async def take(self) -> tuple[str, asyncio.StreamReader, asyncio.StreamWriter] | None:
        """An idle worker connection still open, waiting a little for one."""
        deadline = time.monotonic() + IDLE_WAIT_S
        while time.monotonic() < deadline:
            while self.idle:
                found = self.idle.popleft()
                if not found[1].at_eof() and not found[2].is_closing():
                    return found
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
        return None

    async def deployment(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A connection of the server to the deployment: spliced to one live worker, or
        without one to the discovery-only endpoint, for a moment."""
        found = await self.take()
        if found is not None:
            await splice((reader, writer), (found[1], found[2]))
            return
        try:
            local = await asyncio.open_connection(HOST, self.ports.discovery)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.wait_for(splice((reader, writer), local), FALLBACK_S)
        except TimeoutError:
            writer.close()
            local[1].close()

    async def register(self) -> None:
        """Register the front as the service's deployment (answered by the discovery-only
        endpoint when no worker is there yet)."""
        body = json.dumps({"uri": f"http://{HOST}:{self.ports.front}", "force": True}).encode()
        url = f"http://{HOST}:{self.ports.admin}/deployments"
        for _ in range(100):
            request = urllib.request.Request(
                url, data=body, headers={"Content-Type": "application/json"}
            )
            try:
                answer = await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
                log(f"deployment registered: {answer.status}")
                return
            except (urllib.error.URLError, OSError) as error:
                log(f"registration failed ({error}); again")
                await asyncio.sleep(0.3)
        raise SystemExit("the deployment could not be registered")


def wait_healthy(admin: int, server: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit(f"restate-server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://{HOST}:{admin}/health", timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise SystemExit("restate-server not healthy in 60 s")


def discovery_only(app: typing.Any) -> typing.Any:
    """The SDK's app for the discovery request; 503 (retried by the server) for the rest."""

    async def serve(scope: typing.Any, receive: typing.Any, send: typing.Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/").endswith("/discover"):
            await app(scope, receive, send)
            return
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"no worker"})

    return serve


async def serve(ports: argparse.Namespace) -> None:
    import hypercorn.asyncio
    import hypercorn.config
    import restate
    import restate.server
    import restate_steps

    loop = asyncio.get_running_loop()
    # The SDK's app installs a SIGTERM hook; the front still ends at a SIGTERM (its group's).
    restate.server.install_shutdown_hook(loop, lambda: os._exit(0))
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        ports.discovery = probe.getsockname()[1]
    config = hypercorn.config.Config()
    config.bind = [f"{HOST}:{ports.discovery}"]
    config.accesslog = None
    app = discovery_only(restate.app(services=[restate_steps.agent]))
    spawn(hypercorn.asyncio.serve(app, config, shutdown_trigger=asyncio.Event().wait))
    front = Front(ports)
    deployment = await asyncio.start_server(front.deployment, HOST, ports.front)
    await front.register()
    # Listening on the tunnel port is the lab's sign of readiness: after the registration.
    tunnel = await asyncio.start_server(front.tunnel, HOST, ports.tunnel)
    log(f"front: deployment {ports.front}, tunnel {ports.tunnel}")
    async with deployment, tunnel:
        await asyncio.gather(deployment.serve_forever(), tunnel.serve_forever())


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("ingress", "admin", "node", "front", "tunnel"):
        parser.add_argument(f"--{name}", type=int, required=True)
    ports = parser.parse_args()
    binary = find_server()
    if binary is None:
        raise SystemExit("restate-server not found (bash ci/bootstrap.sh installs it with npm)")
    env = {
        **os.environ,
        **SERVER_ENV,
        "RESTATE_BIND_ADDRESS": f"{HOST}:{ports.node}",
        "RESTATE_ADVERTISED_ADDRESS": f"http://{HOST}:{ports.node}",
        "RESTATE_ADMIN__BIND_ADDRESS": f"{HOST}:{ports.admin}",
        "RESTATE_INGRESS__BIND_ADDRESS": f"{HOST}:{ports.ingress}",
    }
    # In the trial's store/ directory (the lab's cwd): its data there, kept over a restart.
    server = subprocess.Popen(
        [binary, "--base-dir", "restate-data", "--node-name", "crashcert", "--no-logo"], env=env
    )
    try:
        wait_healthy(ports.admin, server)
        asyncio.run(serve(ports))
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
