"""Nothing a trial's workers start outlives the trial.

Workers are killed by process group (faults, teardown), which misses what escaped the group:
a daemon that forked twice and called setsid, reparented to init. Where cgroup v2 is
writable (root, or a delegated subtree), each trial gets a cgroup (harness/lab/cgroups.py)
that every worker enters before it runs; at teardown, once the workers were stopped as
before, whatever is left in it is killed and the cgroup removed. Elsewhere a sweep stands
in: every process of our user in a worker's session, or whose environment carries the
trial's worker ids (a daemon keeps its environment unless it replaces it), is killed.
The trial records which of the two held it and how many processes teardown found left.
Faults are untouched: they still signal a worker's process group, and nothing else.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from harness import errors
from harness.lab import cgroups, forkserver, reaper

CGROUP, SWEEP = "cgroup", "sweep"
# Where a worker's environment block names its worker id: an exec'd worker's own variable,
# a forked one's mark written by the fork server (/proc/PID/environ shows no other).
MARKS = ("CRASHCERT_WORKER_ID", forkserver.MARK_VARIABLE)
# A sweep goes again while it finds processes (one may fork between a read and a kill).
SWEEP_ROUNDS = 10
GONE_TIMEOUT_S = 5.0


class Containment:
    """One trial's: `command()` and `procs_file` put a worker in it, `close()` empties it."""

    def __init__(self, label: str, *, worker_prefix: str) -> None:
        # Every worker id of the trial starts with `worker_prefix`: the sweep's mark.
        self._marks = [f"{name}={worker_prefix}".encode() for name in MARKS]
        self._sessions: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.left: int | None = None  # processes found left at teardown (None: not yet)
        self.group: cgroups.Group | None = None
        parent = cgroups.find_parent()
        self.reason = parent.reason
        if parent.path is not None:
            cgroups.remove_stale(parent.path)
            try:
                self.group = cgroups.Group.create(parent.path, cgroups.own_name(label))
            except OSError as error:
                self.reason = f"cannot create a cgroup in {parent.path}: {error.strerror}"
        # Ctrl-C, SIGTERM or an exception in the harness must not leave a daemon behind.
        self._reaper_key = reaper.register(self.close)

    @property
    def mode(self) -> str:
        return CGROUP if self.group is not None else SWEEP

    @property
    def procs_file(self) -> str | None:
        """The cgroup.procs a forked worker writes itself into (None: no cgroup)."""
        return None if self.group is None else self.group.procs_file

    def command(self, argv: list[str]) -> list[str]:
        """A worker's argv, entering the trial's cgroup before it runs."""
        procs = self.procs_file
        return argv if procs is None else cgroups.enter_argv(argv, procs)

    def track(self, pid: int) -> None:
        """A worker's pid (its own session's id): the sweep's other clue."""
        with self._lock:
            self._sessions.add(pid)

    def describe(self) -> str:
        """For the trial's record: what held its processes and what teardown found left."""
        how = "cgroup v2"
        if self.group is None:
            how = f"session and environment sweep ({self.reason})"
        if self.left is None:
            return how
        return f"{how}; {self.left} process(es) left by the workers killed at teardown"

    def close(self) -> None:
        """Kill whatever the trial's workers left running (call once they were stopped);
        idempotent. A cgroup that cannot be emptied raises EnvironmentProblem."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self.group is not None:
                self.left = len(self.group.close())
            else:
                self.left = sweep(self._sessions, self._marks)
        finally:
            reaper.unregister(self._reaper_key)


def sweep(sessions: set[int], marks: list[bytes]) -> int:
    """SIGKILL every process of ours in one of `sessions` or whose environment block holds
    an entry starting with one of `marks`; the number killed."""
    killed: set[int] = set()
    for _ in range(SWEEP_ROUNDS):
        found = [pid for pid in _processes() if _belongs(pid, sessions, marks)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
        _wait_dead(found)
    return len(killed)


def _processes() -> list[int]:
    me = os.getpid()
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me]


def _belongs(pid: int, sessions: set[int], marks: list[bytes]) -> bool:
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid() or _state(pid) == b"Z":
            return False  # another user's is none of ours; a zombie is dead already
        if os.getsid(pid) in sessions:
            return True
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read()
    except (OSError, ValueError):
        return False  # gone, or not ours to read
    entries = b"\0" + entries
    return any(entries.find(b"\0" + mark) >= 0 for mark in marks)


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rpartition(b")")[2].split()[0]


def _wait_dead(pids: list[int]) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    left = list(pids)
    while left:
        left = [pid for pid in left if _alive(pid)]
        if left and time.monotonic() >= deadline:
            raise errors.EnvironmentProblem(f"processes {left} outlived SIGKILL")
        if left:
            time.sleep(cgroups.POLL_S)


def _alive(pid: int) -> bool:
    try:
        return _state(pid) != b"Z"
    except (OSError, IndexError):
        return False  # gone
