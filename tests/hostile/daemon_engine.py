"""The reference engine's worker, which first starts a daemon the classic way (issue 33):
fork, setsid, fork again. The daemon is reparented to init in a session and process group of
its own, ignores SIGTERM and SIGHUP, appends its pid to the file named by $DAEMON_PIDS, and
sleeps; no process-group kill reaches it. The worker then runs as the reference engine's.

    python -m tests.hostile.daemon_engine worker   (described by the test that uses it)
"""

from __future__ import annotations

import os
import signal
import sys
import time

from reference_engine import cli

PIDS_VARIABLE = "DAEMON_PIDS"


def start_daemon(pids_path: str) -> None:
    """Returns once the daemon's pid is in `pids_path`."""
    ready_read, ready_write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(ready_read)
        os.setsid()
        if os.fork() == 0:
            _daemon(pids_path, ready_write)
        os._exit(0)  # the daemon's parent leaves: init adopts it
    os.close(ready_write)
    os.read(ready_read, 1)
    os.close(ready_read)
    os.waitpid(middle, 0)


def _daemon(pids_path: str, ready: int) -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    descriptor = os.open(pids_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(descriptor, f"{os.getpid()}\n".encode())
    os.close(descriptor)
    os.write(ready, b"1")
    os.close(ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    start_daemon(os.environ[PIDS_VARIABLE])
    sys.exit(cli.main())
