"""Run one hostile case as `crashcert ARGS` in a forked child of this interpreter.

A fork costs milliseconds where a new interpreter pays crashcert's imports again (seconds
each under load); the child still has its own process, working directory, signal handlers,
memory and exit code, so a crash, a hang or a MemoryError stays in it. The child runs the
real entry point (harness.cli.main.entry) with the real argv; only the lab is replaced,
unless the case may start one: a command that reaches it prints LAB_REACHED and exits
LAB_EXIT, so a case refused before the run cannot pass by running a trial. The exit code
and everything written to fds 1 and 2 are the outcome, as from a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from harness.cli import main as _main  # imported once, before the forks
from tests.hostile import inputs


def prepare(case: inputs.Case, directory: pathlib.Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in case.files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@contextlib.contextmanager
def _no_lab(*args: object, **kwargs: object) -> Iterator[None]:
    print(inputs.LAB_REACHED, flush=True)
    os._exit(inputs.LAB_EXIT)
    yield  # never reached


def _child(case: inputs.Case, directory: pathlib.Path, output: int) -> None:
    """In the fork: become `crashcert ARGS` in `directory`; never returns."""
    code = 70
    try:
        os.setpgrp()  # a timeout kills whatever it started too
        os.dup2(output, 1)
        os.dup2(output, 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        sys.stdin = io.TextIOWrapper(io.FileIO(os.open(os.devnull, os.O_RDONLY), "r"))
        os.chdir(directory)
        os.environ.pop("CRASHCERT_PG_DSN", None)
        os.environ.update(case.env)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        from harness.lab import shared

        if not case.lab:
            shared.open_lab = _no_lab  # type: ignore[assignment]
        sys.argv = ["crashcert", *case.args]
        try:
            _main.entry()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # what escapes entry() is what a user would see: a traceback
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def run(case: inputs.Case, directory: pathlib.Path) -> inputs.Outcome:
    prepare(case, directory)
    with tempfile.TemporaryFile() as output:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(case, directory, output.fileno())
        exit_code = _wait(pid, case.limit_s)
        seconds = time.monotonic() - started
        output.seek(0)
        text = output.read().decode(errors="replace")
    return inputs.Outcome(case, exit_code, seconds, text)


def _wait(pid: int, limit_s: float) -> int | None:
    """The child's exit code, or None after killing its group when it outlives `limit_s`."""
    handle = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([handle], [], [], limit_s)
        if not ready:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    finally:
        os.close(handle)


def run_process(case: inputs.Case, directory: pathlib.Path) -> inputs.Outcome:
    """The same case through the installed `crashcert` script: what a shell runs."""
    prepare(case, directory)
    env = {key: value for key, value in os.environ.items() if key != "CRASHCERT_PG_DSN"}
    env.update(case.env)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [inputs.CRASHCERT, *case.args],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=case.limit_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as expired:
        partial = (expired.stdout or b"") + (expired.stderr or b"")
        text = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        return inputs.Outcome(case, None, time.monotonic() - started, text)
    return inputs.Outcome(
        case, done.returncode, time.monotonic() - started, done.stdout + done.stderr
    )
