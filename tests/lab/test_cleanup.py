"""Real parts leave nothing behind: no process, port, socket or directory, however we end.

Each case runs a child Python that provides the parts, reports their PIDs and paths, then
ends one way (exception, Ctrl-C, SIGTERM, exit without closing, SIGKILL). The parent checks
by PID (psutil, guarding against PID reuse), by port and by path.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
import typing

import psutil
import pytest

from harness import errors
from harness.lab import postgres

REPO = pathlib.Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60
GONE_TIMEOUT_S = 30
POLL_S = 0.05

CHILD = textwrap.dedent(
    """
    import json, sys
    from harness.lab import toxiproxy_server
    from harness.lab.postgres import embedded

    mode, with_toxiproxy = sys.argv[1], sys.argv[2] == "1"

    def report(server, toxi):
        backends = [p for p in __import__("psutil").Process(server.postmaster_pid()).children()]
        print(json.dumps({
            "root": str(server.root), "port": server.port,
            "pids": [server.postmaster_pid(), server.watchdog_pid, *[p.pid for p in backends]]
                    + ([toxi.pid] if toxi else []),
            "toxiproxy_port": toxi.port if toxi else None,
        }), flush=True)

    server = embedded.create()
    toxi = toxiproxy_server.start() if with_toxiproxy else None
    if mode == "atexit":  # never closed explicitly: atexit must do it
        report(server, toxi)
        sys.stdin.readline()
        sys.exit(0)
    try:
        report(server, toxi)
        sys.stdin.readline()  # the parent's go-ahead, or its signal interrupts this
        raise RuntimeError("the body failed")
    finally:
        if toxi:
            toxi.close()
        server.close()
    """
)


def _start_child(
    mode: str, *, with_toxiproxy: bool
) -> tuple[subprocess.Popen[str], dict[str, typing.Any]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, "1" if with_toxiproxy else "0"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT_S)
    line = child.stdout.readline() if ready else ""
    if not line:
        child.kill()
        _, err = child.communicate(timeout=GONE_TIMEOUT_S)
        pytest.fail(f"child did not report ready: {err[-2000:]}")
    return child, json.loads(line)


def _end(child: subprocess.Popen[str], mode: str) -> None:
    signals = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}
    if mode in signals:
        child.send_signal(signals[mode])
        child.communicate(timeout=GONE_TIMEOUT_S)
    else:
        child.communicate("go\n", timeout=GONE_TIMEOUT_S)


def _alive(proc: psutil.Process) -> bool:
    try:
        # is_running() compares creation times, so a reused PID does not count.
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _leftovers(procs: list[psutil.Process], info: dict[str, typing.Any]) -> list[str]:
    found = [f"process {p.pid} alive" for p in procs if _alive(p)]
    if pathlib.Path(info["root"]).exists():
        found.append(f"directory {info['root']} exists")
    for port in (info["port"], info["toxiproxy_port"]):
        if port and _port_open(port):
            found.append(f"port {port} answers")
    for proc in psutil.process_iter(["cmdline"]):
        if info["root"] in " ".join(proc.info["cmdline"] or []) and _alive(proc):
            found.append(f"process {proc.pid} mentions {info['root']}")
    return found


def _wait_until_clean(procs: list[psutil.Process], info: dict[str, typing.Any]) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while leftovers := _leftovers(procs, info):
        if time.monotonic() > deadline:
            pytest.fail(f"left behind after {GONE_TIMEOUT_S} s: {leftovers}")
        time.sleep(POLL_S)


def _processes(pids: list[int | None]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass  # a short-lived backend (e.g. the readiness probe) already ended
    return found


def _check(mode: str, *, with_toxiproxy: bool) -> None:
    child, info = _start_child(mode, with_toxiproxy=with_toxiproxy)
    try:
        procs = _processes(info["pids"])
        # The child waits for us: postmaster and watchdog must be up (backends may come and go).
        essential = [p for p in procs if p.pid in info["pids"][:2]]
        assert len(essential) == 2 and all(_alive(p) for p in essential)
        assert pathlib.Path(info["root"]).is_dir()
        _end(child, mode)
    finally:
        if child.poll() is None:  # the test failed early: end the child, the watchdog cleans
            child.kill()
            child.communicate(timeout=GONE_TIMEOUT_S)
    _wait_until_clean(procs, info)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["raise", "sigint", "sigterm", "atexit", "sigkill"])
def test_embedded_postgres_leaves_nothing(mode: str) -> None:
    _check(mode, with_toxiproxy=False)


@pytest.mark.postgres
@pytest.mark.toxiproxy
@pytest.mark.parametrize("mode", ["sigint", "sigterm", "sigkill"])
def test_postgres_and_toxiproxy_leave_nothing(mode: str, toxiproxy_binary: pathlib.Path) -> None:
    _check(mode, with_toxiproxy=True)


@pytest.mark.postgres
def test_provide_cleans_up_when_the_body_raises() -> None:
    seen: dict[str, typing.Any] = {}
    with pytest.raises(RuntimeError):
        with postgres.provide(provider="embedded") as server:
            assert isinstance(server, postgres.embedded.EmbeddedServer)
            seen.update(root=server.root, pid=server.postmaster_pid(), port=server.port)
            postmaster = psutil.Process(seen["pid"])
            raise RuntimeError("body failed")
    assert not _alive(postmaster)
    assert not seen["root"].exists()
    assert not _port_open(seen["port"])


@pytest.mark.postgres
def test_closed_server_refuses_to_start() -> None:
    server = postgres.embedded.create()
    server.close()
    server.close()  # idempotent
    with pytest.raises(errors.CrashcertError, match="closed"):
        server.start()
