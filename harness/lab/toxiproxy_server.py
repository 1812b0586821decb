"""The real Toxiproxy server: find it, build it once with Go, start it, stop it.

    python -m harness.lab.toxiproxy_server build   # go install, prints the binary's path
    python -m harness.lab.toxiproxy_server path    # prints the path, exit 1 if there is none

Lookup: `toxiproxy-server` on PATH, then `$CRASHCERT_CACHE/bin/toxiproxy-server`
(default cache ~/.cache/crashcert). The server is our direct child, in its own session
(Ctrl-C does not reach it), with a parent-death signal (Linux): if the harness is SIGKILLed
the kernel kills it too (the signal follows the *thread* that started it: start it from
a long-lived thread such as the main one). `close()`, atexit and SIGTERM/SIGHUP stop it
by PID. Its log is an unlinked temp file.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing

import psutil

from harness import errors
from harness.lab import proxy, reaper
from harness.lab.cache import cache_dir
from harness.lab.postgres import containers, embedded

VERSION = "2.12.0"
GO_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"
IMAGE = f"ghcr.io/shopify/toxiproxy:{VERSION}"
BINARY_NAME = "toxiproxy-server"
HOST = embedded.HOST
START_TIMEOUT_S = 15
STOP_TIMEOUT_S = 10
BUILD_TIMEOUT_S = 900
POLL_S = 0.05
LOG_TAIL_CHARS = 2000
PORT_ATTEMPTS = 3
PR_SET_PDEATHSIG = 1
HOW_TO_GET = (
    "no Toxiproxy server found: run `python -m harness.lab.toxiproxy_server build` (needs Go; "
    f"installs {GO_PACKAGE}@v{VERSION} into $CRASHCERT_CACHE/bin) or put {BINARY_NAME} on "
    "PATH; set CRASHCERT_SKIP_TOXIPROXY=1 to skip network-fault tests instead"
)

Provider = typing.Literal["auto", "binary", "testcontainers"]


def find_binary() -> pathlib.Path | None:
    on_path = shutil.which(BINARY_NAME)
    if on_path:
        return pathlib.Path(on_path)
    cached = cache_dir() / "bin" / BINARY_NAME
    return cached if os.access(cached, os.X_OK) else None


def build(*, timeout_s: float = BUILD_TIMEOUT_S) -> pathlib.Path:
    """`go install` the server into the cache (once; concurrent callers wait for the first)."""
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
    )
    bindir = cache_dir() / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    target = bindir / BINARY_NAME
    with open(bindir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.access(target, os.X_OK):
            return target
        if go is None:
            raise errors.EnvironmentProblem(
                f"cannot build Toxiproxy: no `go` on PATH; install Go or put {BINARY_NAME} on PATH"
            )
        with tempfile.TemporaryDirectory(prefix="crashcert-gobin-") as gobin:
            result = subprocess.run(
                [go, "install", f"{GO_PACKAGE}@v{VERSION}"],
                env={**os.environ, "GOBIN": gobin},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            built = pathlib.Path(gobin) / "server"
            if result.returncode != 0 or not built.exists():
                raise errors.EnvironmentProblem(
                    f"go install {GO_PACKAGE}@v{VERSION} failed ({result.returncode}):\n"
                    f"{result.stderr[-2000:]}"
                )
            # Copy next to the target, then rename: no one ever sees half a binary.
            partial = bindir / f".{BINARY_NAME}.partial"
            shutil.copy2(built, partial)
            os.replace(partial, target)
    return target


class ToxiproxyServer:
    """A running Toxiproxy server we started. `client` talks to it; `close()` stops it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log_fd: int) -> None:
        self._process = process
        self.host = HOST
        self.port = port
        self._log_fd: int | None = log_fd
        self.client = proxy.Toxiproxy(HOST, port)
        self._reaper_key = reaper.register(self.close)

    @property
    def pid(self) -> int:
        return self._process.pid

    def log_tail(self, *, chars: int = LOG_TAIL_CHARS) -> str:
        """The end of the server's output (kept in an unlinked file: nothing to clean up)."""
        if self._log_fd is None:
            return ""
        size = os.fstat(self._log_fd).st_size
        start = max(0, size - chars)
        return os.pread(self._log_fd, size - start, start).decode(errors="replace")

    def running(self) -> bool:
        return self._process.poll() is None

    def listening(self) -> bool:
        """Whether this very process holds the listening socket (not someone else on the port)."""
        return bool(self.admin_addresses())

    def admin_addresses(self) -> list[str]:
        """The addresses this process's admin API listens on (empty while it does not)."""
        try:
            conns = psutil.Process(self.pid).net_connections(kind="tcp")
        except psutil.Error:
            return []
        listening = [c for c in conns if c.status == psutil.CONN_LISTEN]
        return [c.laddr.ip for c in listening if c.laddr.port == self.port]

    @property
    def exit_code(self) -> int | None:
        """None while it runs."""
        return self._process.poll()

    def close(self) -> None:
        """Stop by PID (SIGTERM, then SIGKILL). Idempotent."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()
            try:
                self._process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=STOP_TIMEOUT_S)
        if self._log_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._log_fd)
            self._log_fd = None
        reaper.unregister(self._reaper_key)


def start(*, binary: pathlib.Path | None = None) -> ToxiproxyServer:
    """Start the server on a free loopback port and wait until /version answers."""
    binary = binary or find_binary()
    if binary is None:
        raise errors.EnvironmentProblem(HOW_TO_GET)
    for attempt in range(PORT_ATTEMPTS):
        server = _launch(binary, embedded.free_port())
        state = _wait_ready(server)
        if state == "ready":
            _ensure_loopback_only(server)
            return server
        log, exit_code = server.log_tail(), server.exit_code
        server.close()
        # Another process may have taken the port between our probe and the server's bind;
        # Toxiproxy then logs the error and keeps running without its API.
        if state != "port_taken" or attempt == PORT_ATTEMPTS - 1:
            raise errors.EnvironmentProblem(
                f"Toxiproxy ({binary}) did not answer on {HOST}:{server.port} within "
                f"{START_TIMEOUT_S} s ({state}, exit {exit_code}):\n{log}"
            )
    raise AssertionError("unreachable")


def _launch(binary: pathlib.Path, port: int) -> ToxiproxyServer:
    # The log lives in an unlinked file: even a SIGKILLed harness leaves no file behind.
    fd, log_name = tempfile.mkstemp(prefix="crashcert-toxiproxy-", suffix=".log")
    os.unlink(log_name)
    try:
        process = subprocess.Popen(
            [str(binary), "-host", HOST, "-port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            env={**os.environ, "LOG_LEVEL": "warn"},
            preexec_fn=_die_with_parent,
        )
    except OSError as exc:
        os.close(fd)
        raise errors.EnvironmentProblem(f"cannot start Toxiproxy ({binary}): {exc}") from exc
    return ToxiproxyServer(process, port, fd)


def _ensure_loopback_only(server: ToxiproxyServer) -> None:
    """The admin API has no authentication: beyond loopback anyone could drive it."""
    exposed = [
        ip
        for ip in server.admin_addresses()
        if not proxy.listens_on_loopback(f"{ip}:{server.port}")
    ]
    if exposed:
        server.close()
        raise errors.EnvironmentProblem(
            f"Toxiproxy's admin API listens on {', '.join(exposed)} port {server.port}, "
            f"not only on {HOST}: refusing a server anyone on the network could drive"
        )


def _wait_ready(server: ToxiproxyServer) -> typing.Literal["ready", "port_taken", "failed"]:
    """Ready once *our* process listens on the port and /version answers there."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not server.running():
            return "failed"
        if server.listening():
            if server.client.answers():
                return "ready"
        elif embedded.port_taken(server.port) and not server.listening():
            return "port_taken"
        time.sleep(POLL_S)
    return "failed"


@contextlib.contextmanager
def provide(*, provider: Provider = "auto") -> typing.Iterator[proxy.Toxiproxy]:
    """A Toxiproxy client for a server that lives as long as the block.

    auto: the local binary; without one, a container where a Docker engine answers.
    """
    if provider == "auto" and find_binary() is None and containers.docker_engine_answers():
        provider = "testcontainers"
    if provider == "testcontainers":
        with _container() as client:
            yield client
        return
    if provider not in ("auto", "binary"):
        raise errors.CrashcertError(f"unknown Toxiproxy provider {provider!r}")
    server = start()
    try:
        yield server.client
    finally:
        server.close()


@contextlib.contextmanager
def _container() -> typing.Iterator[proxy.Toxiproxy]:
    """Toxiproxy in Docker with host networking, so proxies listen on our loopback (Linux)."""
    if not containers.docker_engine_answers():
        raise errors.EnvironmentProblem(f"Toxiproxy via testcontainers: {containers.NO_DOCKER}")
    from testcontainers.core.container import DockerContainer

    port = embedded.free_port()
    container = (
        DockerContainer(IMAGE)
        .with_command(["-host", HOST, "-port", str(port)])
        .with_kwargs(network_mode="host")
    )
    container.start()
    try:
        client = proxy.Toxiproxy(HOST, port)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not client.answers():
            if time.monotonic() > deadline:
                raise errors.EnvironmentProblem(f"Toxiproxy container did not answer on {port}")
            time.sleep(POLL_S)
        yield client
    finally:
        container.stop()


def _die_with_parent() -> None:
    # Runs in the child before exec: the kernel SIGKILLs it when our (forking) thread dies.
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.lab.toxiproxy_server")
    parser.add_argument("command", choices=["build", "path"])
    args = parser.parse_args(argv)
    try:
        found = find_binary()
        if found is None and args.command == "build":
            found = build()
        if found is None:
            print(HOW_TO_GET, file=sys.stderr)
            return 1
    except errors.CrashcertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
