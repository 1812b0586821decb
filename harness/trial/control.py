"""The control channel: a Unix socket where engine workers report boundaries and wait.

Protocol (harness/CONTRACT.md section 2): the engine writes one JSON line per boundary
and blocks until it reads `{"action":"continue"}`. The server records every hit and asks
a policy what to do while the worker is held; the policy may kill the worker (then no
answer is ever sent), pause it, or cut its database before answering.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from harness.lab import reaper
from harness.record import history
from harness.record import recorder as recorder_module

log = logging.getLogger(__name__)

CONTINUE = b'{"action":"continue"}\n'
MAX_LINE = 64 * 1024
SOCKET_NAME = "control.sock"
# A control directory is named cc-<pid of its crashcert>-<random>: stale ones are found by it.
PREFIX = "cc-"
# How quickly the accept loop notices stop(): socketserver's default 0.5 s cost every trial
# a quarter second of teardown on average.
SHUTDOWN_POLL_S = 0.02
# Unix socket paths are limited to ~107 bytes; a TMPDIR longer than this falls back to /tmp.
MAX_TMPDIR_BYTES = 60

# Called with each hit while the worker is blocked; returning means "answer continue".
Policy = Callable[[history.BoundaryHit], None]


class ControlServer:
    """Accepts any number of workers; each connection is served by its own thread."""

    def __init__(
        self,
        recorder: recorder_module.Recorder,
        *,
        policy: Policy | None = None,
    ) -> None:
        self.path = ""  # set by start(): a socket in a directory only our user can enter
        self._directory: str | None = None
        self._cleanup_key: int | None = None
        self._recorder = recorder
        self._policy = policy
        self._occurrences: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        self.protocol_errors: list[str] = []

    def set_policy(self, policy: Policy | None) -> None:
        self._policy = policy

    def start(self) -> ControlServer:
        # Only our user may report. The socket is made in a fresh 0700 directory and then
        # set to 0600 on the file itself: never through the umask, which is process-wide
        # and raced by other threads (a leaked umask 0177 once crashed Chromium in the suite).
        remove_stale(_short_tmpdir())
        self._directory = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=_short_tmpdir())
        self._cleanup_key = reaper.register(self._remove_directory)
        self.path = os.path.join(self._directory, SOCKET_NAME)
        server = socketserver.ThreadingUnixStreamServer(self.path, _handler_for(self))
        os.chmod(self.path, 0o600)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="control",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._remove_directory()
        if self._cleanup_key is not None:
            reaper.unregister(self._cleanup_key)
            self._cleanup_key = None

    def _remove_directory(self) -> None:
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(
        self, predicate: Callable[[history.BoundaryHit], bool], *, timeout: float
    ) -> history.BoundaryHit | None:
        """Block until a recorded hit satisfies `predicate` (signals, not sleeps)."""
        return self._recorder.wait_for(predicate, timeout=timeout)

    def _record(self, message: dict[str, Any]) -> history.BoundaryHit:
        point = str(message["boundary"])
        with self._lock:
            self._occurrences[point] += 1
            occurrence = self._occurrences[point]
        detail = message.get("detail")
        hit = history.BoundaryHit(
            point=point,
            occurrence=occurrence,
            run_id=_optional_str(message.get("run_id")),
            worker_id=_optional_str(message.get("worker_id")),
            pid=message.get("pid") if isinstance(message.get("pid"), int) else None,
            detail=detail if isinstance(detail, dict) else {},
        )
        stamped = self._recorder.append(hit)
        assert isinstance(stamped, history.BoundaryHit)
        return stamped

    def _serve_line(self, line: bytes) -> bool:
        """Record one report and apply the policy. False: do not answer (worker is gone)."""
        try:
            message = json.loads(line)
            if not isinstance(message, dict) or not isinstance(message.get("boundary"), str):
                raise ValueError("expected a JSON object with a string 'boundary'")
        except ValueError as error:
            self.protocol_errors.append(f"bad control line {line[:200]!r}: {error}")
            log.warning("control channel: %s", self.protocol_errors[-1])
            return True  # answer anyway: a harness that hangs an engine proves nothing
        hit = self._record(message)
        policy = self._policy
        if policy is not None:
            policy(hit)
        return True


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _handler_for(server: ControlServer) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while True:
                try:
                    line = self.rfile.readline(MAX_LINE)
                except OSError:
                    return
                if not line:
                    return
                if not server._serve_line(line):
                    return
                try:
                    self.wfile.write(CONTINUE)
                    self.wfile.flush()
                except OSError:
                    return  # the worker died while held: that is the point of a kill

    return Handler


def remove_stale(tmpdir: str) -> list[str]:
    """Control directories of a crashcert that died without cleaning up (SIGKILL, OOM): each
    is named after its owner's pid, and one of our user's whose owner is gone is removed
    here, by the next trial of any crashcert. A pid that lives again keeps its directory."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(tmpdir))
    except OSError:
        return removed
    for entry in entries:
        owner = _owner_pid(entry.name)
        if owner is None or _alive(owner):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


def _owner_pid(name: str) -> int | None:
    head, _, rest = name.removeprefix(PREFIX).partition("-")
    if not name.startswith(PREFIX) or not rest or not head.isdigit() or len(head) > 10:
        return None
    return int(head)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def _short_tmpdir() -> str:
    tmpdir = tempfile.gettempdir()
    return tmpdir if len(tmpdir.encode()) <= MAX_TMPDIR_BYTES else "/tmp"
