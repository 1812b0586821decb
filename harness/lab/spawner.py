"""Client of the warm fork server (harness/lab/forkserver.py), one per lab and engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psutil

from harness import errors
from harness.lab import forkserver

START_TIMEOUT_S = 60.0
FORKSERVER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")


def module_command(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """`[python, -m, module, args...]` -> (module, args); other commands cannot be forked."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2], list(argv[3:])
    return None


def interpreter(argv: Sequence[str]) -> str:
    """The Python a `[python, -m, module, ...]` worker names: its fork server must be that
    interpreter, so an engine in its own virtualenv gets its own packages, not ours."""
    return argv[0] if module_command(argv) is not None else sys.executable


class ForkServer:
    def __init__(
        self,
        preload: Sequence[str],
        *,
        cwd: str | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self.python = python or sys.executable
        # What the server said before it died (an import that failed), for the error.
        self._stderr = tempfile.TemporaryFile()
        # By path, not `-m harness.lab.forkserver`: another interpreter has no crashcert
        # installed; the server uses the standard library only.
        try:
            self._process = subprocess.Popen(
                [self.python, FORKSERVER_SCRIPT, *preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=cwd,
                # room for each child's mark (forkserver.MARK_VARIABLE), written in place
                env={
                    **(os.environ if env is None else env),
                    forkserver.MARK_VARIABLE: forkserver.PLACEHOLDER,
                },
                text=True,
                bufsize=1,
                # A session of its own: a terminal's Ctrl-C (SIGINT to the foreground group)
                # must not end it under the trials' teardown; it ends when its stdin closes.
                start_new_session=True,
            )
        except OSError as error:
            self._stderr.close()
            raise errors.EnvironmentProblem(f"cannot start the fork server: {error}") from None
        try:
            ready = self._read()
        except errors.EnvironmentProblem:
            self._process.wait(5)
            self._stderr.close()
            raise
        if not ready.get("ready"):
            raise errors.EnvironmentProblem(f"fork server did not start: {ready}")
        # what a child forked from it finds imported: the preloads and all they imported
        self.modules = frozenset(ready.get("modules", preload))

    def _said(self) -> str:
        """The last line the server wrote on stderr (a traceback's error line)."""
        self._stderr.seek(0)
        lines = self._stderr.read()[-4096:].decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "nothing on stderr"

    def _read(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait(5) if self._process.poll() is None else self._process.poll()
            raise errors.EnvironmentProblem(
                f"fork server under {self.python} exited (code {code}): {self._said()}"
            )
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
            return self._read()

    def spawn(
        self,
        module: str,
        args: list[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        log: str,
        cgroup_procs: str | None = None,
    ) -> int:
        """A forked worker; with `cgroup_procs` it enters that cgroup before it answers."""
        request = {"module": module, "args": args, "env": dict(env), "cwd": cwd, "log": log}
        if cgroup_procs is not None:
            request["cgroup_procs"] = cgroup_procs
        reply = self._ask({"spawn": request})
        if "pid" not in reply:
            raise errors.EnvironmentProblem(f"fork server refused to spawn: {reply}")
        return int(reply["pid"])

    def returncode(self, pid: int) -> int | None:
        value = self._ask({"status": pid}).get("returncode")
        return None if value is None else int(value)

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()


class ForkedProcess:
    """The subprocess.Popen surface Worker uses, for a child of the fork server."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self._returncode: int | None = None

    def poll(self) -> int | None:
        if self._returncode is not None:
            return self._returncode
        try:
            if psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE:
                return None
        except psutil.NoSuchProcess:
            pass
        # Dead; None means the server's reaper has not run yet: ask again next time.
        self._returncode = self._server.returncode(self.pid)
        return self._returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.poll()
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.01)


def forking_enabled() -> bool:
    """CRASHCERT_NO_FORKSERVER=1 starts every worker with exec, as a plain command."""
    return os.environ.get("CRASHCERT_NO_FORKSERVER") != "1"
