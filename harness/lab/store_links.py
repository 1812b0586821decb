"""An engine's own store for one trial: its server, started in the trial's directory on
loopback, and one Toxiproxy proxy per worker on each named link (harness/engines/store.py).

The server runs as a process group of its own, like a worker (its log beside the workers'),
in its data directory (`store/` of the trial),
and is ready before any worker starts: its `ready` command exits 0, or, without one, each
link's port takes a TCP connection. `server_restart` SIGKILLs it and starts it again on
the same ports and data (harness/nemesis/store.py); the trial stops it at its end.
"""

from __future__ import annotations

import logging
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from harness import errors
from harness.engines import adapter, store
from harness.lab import processes, proxy, proxy_ports
from harness.lab.postgres import embedded

log = logging.getLogger(__name__)

HOST = proxy.LOOPBACK
READY_POLL_S = 0.1
READY_COMMAND_TIMEOUT_S = 10.0
SERVER_LOGS = "servers"
# The server's ports come from below the kernel's ephemeral range (harness/lab/proxy_ports.py):
# probed free in that range, one could be given to any outgoing connection, or to the
# server's own request for a free port, before the server bound it (seen: Temporal's HTTP
# port taken beside two CPU hogs; its worker service bound to our metrics port in CI). A
# first start whose port a stranger took anyway is tried again on fresh ports.
PORT_ATTEMPTS = 3


def description_of(engine: Any) -> Any | None:
    """The engine's description when it names a store server, else None."""
    description = getattr(engine, "description", None)
    if description is None or getattr(description, "server", None) is None:
        return None
    return description


class StoreServer:
    """The engine's server for one trial: started, checked ready, restarted, stopped."""

    def __init__(self, description: Any, *, cwd: str | None, directory: pathlib.Path) -> None:
        self._spec: store.Server = description.server
        self._links: dict[str, store.Link] = dict(description.links)
        self._cwd = cwd
        self._data = directory / "store"
        self._data.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._logs = directory / SERVER_LOGS
        self._book = proxy_ports.shared()
        self.ports = self._free_ports()
        self._process: processes.Worker | None = None
        self._starts = 0
        self._lock = threading.Lock()

    def _free_ports(self) -> dict[str, int]:
        """A loopback port free now for each port the server names, held in the book until
        the server stops (the kernel's choice where the book has no room)."""
        if self._book is None:
            return {name: embedded.free_port() for name in self._spec.ports}
        ports = {}
        for name in self._spec.ports:
            while embedded.port_taken(port := self._book.take(self._held_as(name))):
                self._book.refused(self._held_as(name))  # a stranger's: never again
            ports[name] = port
        return ports

    def _held_as(self, name: str) -> str:
        return f"store-{id(self):x}-{name}"

    def _give_back_ports(self) -> None:
        """Release the ports in the book; one a stranger holds now is never tried again."""
        if self._book is None:
            return
        for name, port in self.ports.items():
            if embedded.port_taken(port):
                self._book.refused(self._held_as(name))
            else:
                self._book.release(self._held_as(name))

    def _values(self) -> dict[str, str]:
        return {
            "python": sys.executable,
            "bin": str(pathlib.Path(sys.executable).parent),
            "data_dir": str(self._data),
            # The description's own directory: a server script shipped beside it (the
            # server runs in its data directory, where a relative path would not lead).
            "engine_dir": str(pathlib.Path(self._cwd or ".").resolve()),
            "host": HOST,
            **{name: str(port) for name, port in self.ports.items()},
        }

    @property
    def links(self) -> dict[str, store.Link]:
        return self._links

    def env(self) -> dict[str, str]:
        """Each link's variable naming the server itself (for submit and status)."""
        return {
            link.env: self.address(name, HOST, self.ports[link.port])
            for name, link in self._links.items()
        }

    def address(self, name: str, host: str, port: int) -> str:
        return self._links[name].value.format(host=host, port=port)

    def upstream(self, name: str) -> str:
        return f"{HOST}:{self.ports[self._links[name].port]}"

    def start(self) -> None:
        """Start the server and wait until it is ready. A first start whose server exited
        while another process holds one of its ports is tried again on fresh ports; a
        restart keeps its ports, since the workers' proxies lead to them."""
        first = self._starts == 0
        for attempt in range(PORT_ATTEMPTS):
            try:
                self._start_once()
                return
            except errors.EnvironmentProblem:
                if not first or attempt == PORT_ATTEMPTS - 1 or not self._lost_a_port():
                    raise
            log.info("the store server's ports %s were taken: new ports", self.ports)
            self._give_back_ports()
            self.ports = self._free_ports()

    def _lost_a_port(self) -> bool:
        """Whether the server died and some other process now holds one of its ports."""
        with self._lock:
            process = self._process
        if process is None or process.alive:
            return False
        process.kill()  # its group too: a child still bound would look like a stranger
        return any(embedded.port_taken(port) for port in self.ports.values())

    def _start_once(self) -> None:
        values = self._values()
        argv = [part.format(**values) for part in self._spec.command]
        env = adapter.inherited_environment()
        env.update({name: value.format(**values) for name, value in self._spec.env.items()})
        with self._lock:
            self._starts += 1
            # In its data directory: a relative file name there stays in the trial even
            # where the trial's path holds characters a URI cuts at (`#`, `?`: SQLite).
            self._process = processes.Worker(
                f"server-{self._starts}", argv, env=env, log_dir=self._logs, cwd=str(self._data)
            )
        self._wait_ready(values, env)

    def _wait_ready(self, values: Mapping[str, str], env: Mapping[str, str]) -> None:
        deadline = time.monotonic() + self._spec.ready_timeout_s
        ready = [part.format(**values) for part in self._spec.ready] if self._spec.ready else None
        command_env = {**env, **self.env()}
        while True:
            process = self._process
            if process is None or not process.alive:
                where = process.log_path if process is not None else "none"
                raise errors.EnvironmentProblem(
                    f"the engine's server exited before it was ready (log {where})"
                )
            if self._answers(ready, command_env):
                return
            if time.monotonic() > deadline:
                raise errors.EnvironmentProblem(
                    f"the engine's server was not ready within {self._spec.ready_timeout_s:g}s "
                    f"(log {process.log_path})"
                )
            time.sleep(READY_POLL_S)

    def _answers(self, ready: list[str] | None, env: Mapping[str, str]) -> bool:
        if ready is None:
            return all(_accepts(HOST, self.ports[link.port]) for link in self._links.values())
        try:
            done = subprocess.run(
                ready, env=dict(env), cwd=self._cwd, capture_output=True,
                timeout=READY_COMMAND_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def kill(self) -> None:
        """SIGKILL the server's process group (its data stays for the restart)."""
        with self._lock:
            process = self._process
        if process is not None:
            process.kill()

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.terminate()
        if self._book is not None:
            for name in self.ports:
                self._book.release(self._held_as(name))


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class StoreLinks:
    """One Toxiproxy proxy per worker per named link (made on a worker's first start)."""

    def __init__(self, server: StoreServer, client: proxy.Toxiproxy | None, *, prefix: str) -> None:
        self.server = server
        self._client = client
        self._prefix = prefix
        self._proxies: dict[tuple[str, str], proxy.Proxy] = {}
        self._lock = threading.Lock()

    def env_for(self, worker_id: str) -> dict[str, str]:
        """The worker's store variables, each through its own proxy (direct without
        Toxiproxy: a store fault is then not applied, the trial INCONCLUSIVE)."""
        env = self.server.env()
        if self._client is None:
            return env
        for name, link in self.server.links.items():
            with self._lock:
                made = self._proxies.get((worker_id, name))
                if made is None:
                    made = self._client.create(
                        f"{self._prefix}-{worker_id}-{name}", upstream=self.server.upstream(name)
                    )
                    self._proxies[(worker_id, name)] = made
            env[link.env] = self.server.address(name, made.listen_host, made.listen_port)
        return env

    def proxy(self, worker_id: str | None, link: str) -> proxy.Proxy | None:
        return self._proxies.get((worker_id or "", link))

    def close(self) -> None:
        for made in self._proxies.values():
            try:
                made.delete()
            except errors.CrashcertError as error:  # cleanup must not hide the outcome
                log.debug("store proxy not deleted: %s", error)


def for_trial(
    engine: Any, client: proxy.Toxiproxy | None, directory: pathlib.Path, *, prefix: str
) -> StoreLinks | None:
    """The trial's store, started and ready; None when the engine names no server."""
    description = description_of(engine)
    if description is None:
        return None
    server = StoreServer(description, cwd=engine.cwd, directory=directory)
    try:
        server.start()
    except BaseException:
        server.stop()  # a server never ready still runs, and still holds its ports
        raise
    return StoreLinks(server, client, prefix=prefix)
