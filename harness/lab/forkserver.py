"""A warm fork server for Python engine workers: import once, fork each worker.

`python -m <module> worker` spends most of its start-up importing (the `openai` client
alone takes about a second). For an engine whose description lists `preload` modules, the
harness starts this server once per lab; the server imports those modules and then forks a
worker per request. Each child is a real process in its own session and process group,
with its own environment, working directory and log file, running the module exactly as
`python -m` would. SIGKILL, SIGSTOP and SIGCONT reach it like any other worker.

Protocol on stdin/stdout, one JSON line each way, after the server's first line
`{"ready": true, "pid": ..., "modules": [every module imported]}`:
    {"spawn": {"module": "reference_engine", "args": ["worker"], "env": {...},
               "cwd": "...", "log": "/path/worker.log",
               "cgroup_procs": "/sys/fs/cgroup/.../cgroup.procs"}}   ->  {"pid": 1234}
("cgroup_procs" optional: the child enters that cgroup, harness/lab/containment.py, before
the server answers, so nothing the worker starts is outside it.)
    {"status": 1234}   ->  {"returncode": null | int}   (null: still running or unknown)

Only the standard library is imported before the preload modules: the server must not
start threads, since forking a threaded process is unsafe.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import sys
from typing import Any

_exits: dict[int, int] = {}
# The harness starts this server with MARK_VARIABLE set to MARK_BYTES placeholder bytes; each
# child writes its worker id over them, in the environment block /proc/PID/environ shows and
# its own forks inherit (a forked worker's os.environ lives elsewhere, unseen there), so a
# daemon it starts carries the mark the harness's sweep looks for (harness/lab/containment.py).
MARK_VARIABLE = "CRASHCERT_FORKED_WORKER"
MARK_BYTES = 96
PLACEHOLDER = "_" * MARK_BYTES


def _reap(signum: int, frame: object) -> None:
    del signum, frame
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _exits[pid] = os.waitstatus_to_exitcode(status)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the fork server dies (it dies with the harness),
    so a harness that is itself killed leaves no worker behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the server died before prctl took effect
        os._exit(1)


def _enter_cgroup(procs: str | None) -> str:
    """Move this process into the cgroup whose cgroup.procs is `procs` (pid 0: the writer);
    what went wrong, or "". A worker that cannot be placed still runs, uncontained."""
    if not procs:
        return ""
    try:
        with open(procs, "w") as group:
            group.write("0")
    except OSError as error:
        return str(error)
    return ""


def _mark(worker_id: str) -> None:
    """Our worker id over the placeholder in our initial environment block (nothing
    when the block has none: a server the harness did not start)."""
    try:
        import ctypes

        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: stat(5) 50, 51
        block = b"\0" + ctypes.string_at(start, end - start)
    except (OSError, IndexError, ValueError):
        return
    key = f"\0{MARK_VARIABLE}={PLACEHOLDER}\0".encode()
    at = block.find(key)
    if at < 0:
        return
    value = worker_id.encode()[:MARK_BYTES].ljust(MARK_BYTES, b"\0")
    # `at` counts the NUL put in front of the block; the value follows "\0NAME=".
    ctypes.memmove(start + at + len(MARK_VARIABLE) + 1, value, MARK_BYTES)


def _child(request: dict[str, Any], channel: tuple[int, int], ready: int) -> None:
    """In the forked child: become a fresh worker process, then run the module."""
    for fd in channel:
        os.close(fd)
    os.setsid()  # own session and process group: the harness kills the group
    _die_with_parent()
    placed = _enter_cgroup(request.get("cgroup_procs"))
    os.write(ready, b"1")  # only now may the harness signal our group
    os.close(ready)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _mark(request["env"].get("CRASHCERT_WORKER_ID", ""))
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    if placed:
        print(f"[crashcert] not placed in cgroup {request['cgroup_procs']}: {placed}", flush=True)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    # As `python -m` would: the working directory first, then PYTHONPATH.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [os.getcwd(), *extra]
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def serve(preload: list[str]) -> None:
    for module in preload:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, _reap)
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    channel = (requests.fileno(), replies.fileno())
    # Every module now imported, not only those named: a lab can lend this server to an
    # engine whose preloads it imported on the way (harness/lab/shared.py, with_engine).
    ready = {"ready": True, "pid": os.getpid(), "modules": sorted(sys.modules)}
    replies.write(json.dumps(ready) + "\n")
    for line in requests:
        message = json.loads(line)
        if "spawn" in message:
            ready_read, ready_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(ready_read)
                _child(message["spawn"], channel, ready_write)
            os.close(ready_write)
            os.read(ready_read, 1)  # the child is its own process group before we answer
            os.close(ready_read)
            replies.write(json.dumps({"pid": pid}) + "\n")
        elif "status" in message:
            replies.write(json.dumps({"returncode": _exits.get(int(message["status"]))}) + "\n")
        else:
            replies.write(json.dumps({"error": f"unknown request {message!r}"}) + "\n")


if __name__ == "__main__":
    if __spec__ is None:  # run by path (another interpreter): resolve modules as `-m` would
        sys.path[0] = os.getcwd()
    serve(sys.argv[1:])
    # The harness closed our stdin: nothing is left to flush, and finalizing what the
    # preload imported (a framework's modules) costs about half a second of every lab's close.
    os._exit(0)
