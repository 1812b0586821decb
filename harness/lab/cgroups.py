"""cgroup v2 groups that hold a trial's processes: created, entered, killed and removed.

A process group or a session does not hold a daemon that forks twice and calls setsid; a
cgroup does: a process cannot leave it (moving one needs write access to cgroup.procs
above it, which an engine's worker has no reason to use), and its children are born in it.
Groups live under `crashcert/` beside our own cgroup in the unified hierarchy, each named
`cc-<owner pid>-<owner start time>-<label>`, so the next crashcert removes those whose owner
is gone (SIGKILLed) and never another live crashcert's.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import time

from harness import errors

PARENT_NAME = "crashcert"
PREFIX = "cc-"
EMPTY_TIMEOUT_S = 5.0
POLL_S = 0.002
# Moves the shell itself (pid 0: the writer) into the group, then becomes the command, so
# nothing the command runs is ever outside it. A failed move is said in the worker's log and
# the worker still runs: a trial is never lost for want of a cgroup.
ENTER_SCRIPT = (
    'echo 0 >"$0" || echo "[crashcert] not placed in cgroup $0: not contained" >&2; exec "$@"'
)
SHELL = "/bin/sh"


@dataclasses.dataclass(frozen=True)
class Parent:
    """Where our groups go (`path`), or why there is no such place (`reason`)."""

    path: pathlib.Path | None
    reason: str


def find_parent(
    *, mountinfo: str = "/proc/self/mountinfo", membership: str = "/proc/self/cgroup"
) -> Parent:
    """`crashcert/` under our own cgroup v2, created when we may make groups there and move
    processes into them (root, or a delegated subtree); otherwise the reason."""
    mount = _unified_mount(mountinfo)
    if mount is None:
        return Parent(None, "no cgroup v2 hierarchy is mounted")
    point, root = mount
    own = _own_cgroup(membership)
    if own is None:
        return Parent(None, "this process is in no cgroup v2")
    relative = os.path.relpath(own, root)
    if relative.startswith(".."):
        return Parent(None, f"our cgroup {own} is outside the mounted hierarchy")
    base = pathlib.Path(point) / relative
    # Moving a process needs write access to cgroup.procs of the lowest common ancestor.
    if not os.access(base / "cgroup.procs", os.W_OK):
        return Parent(None, f"{base}/cgroup.procs is not writable (no root, no delegation)")
    parent = base / PARENT_NAME
    try:
        parent.mkdir(exist_ok=True)
    except OSError as error:
        return Parent(None, f"cannot create {parent}: {error.strerror}")
    return Parent(parent, "")


def _unified_mount(mountinfo: str) -> tuple[str, str] | None:
    """(mount point, root within the hierarchy) of the first cgroup2 mount."""
    try:
        with open(mountinfo) as lines:
            for line in lines:
                fields = line.split()
                if "-" not in fields:
                    continue
                after = fields[fields.index("-") + 1 :]
                if after and after[0] == "cgroup2":
                    return _unescape(fields[4]), _unescape(fields[3])
    except OSError:
        return None
    return None


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _own_cgroup(membership: str) -> str | None:
    try:
        with open(membership) as lines:
            for line in lines:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        return None
    return None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, an identity that a
    reused pid does not share."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return int(fields[19])  # field 22 of stat(5); fields[0] here is field 3


def own_name(label: str) -> str:
    pid = os.getpid()
    return f"{PREFIX}{pid}-{start_time(pid)}-{label}"


def enter_argv(argv: list[str], procs_file: str) -> list[str]:
    """`argv` run from inside the group whose cgroup.procs is `procs_file`."""
    return [SHELL, "-c", ENTER_SCRIPT, procs_file, *argv]


class Group:
    """One cgroup v2 directory of ours."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    @classmethod
    def create(cls, parent: pathlib.Path, name: str) -> Group:
        path = parent / name
        path.mkdir()
        return cls(path)

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def pids(self) -> list[int]:
        """The live processes in the group and its children (zombies are not listed)."""
        found: list[int] = []
        for directory, _, _ in os.walk(self.path):
            try:
                with open(os.path.join(directory, "cgroup.procs")) as procs:
                    found.extend(int(line) for line in procs if line.strip())
            except OSError:
                continue
        return found

    def kill(self, *, timeout: float = EMPTY_TIMEOUT_S, use_kill_file: bool = True) -> list[int]:
        """SIGKILL every process in the group, confirmed gone; returns the pids it held.
        cgroup.kill (Linux 5.14) kills the whole subtree at once; before it, freeze the group
        (so nothing forks meanwhile), SIGKILL each pid, thaw."""
        held = self.pids()
        if not held:
            return held
        kill_file = self.path / "cgroup.kill"
        if use_kill_file and kill_file.exists():
            kill_file.write_text("1")
        else:
            self._freeze_and_kill(timeout)
        if not _wait(lambda: not self.pids(), timeout):
            raise errors.EnvironmentProblem(
                f"processes {self.pids()} in {self.path} outlived SIGKILL for {timeout}s"
            )
        return held

    def _freeze_and_kill(self, timeout: float) -> None:
        freeze = self.path / "cgroup.freeze"
        frozen = freeze.exists()
        if frozen:
            freeze.write_text("1")
            _wait(lambda: "frozen 1" in self._events(), timeout)
        try:
            # Without a freezer a process may fork between a read and the kills: go again.
            deadline = time.monotonic() + timeout
            while (pids := self.pids()) and time.monotonic() < deadline:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if frozen:
                    break  # a frozen group forks nothing: one round kills all
                time.sleep(POLL_S)
        finally:
            if frozen:
                freeze.write_text("0")  # a SIGKILLed frozen process dies once thawed

    def _events(self) -> str:
        try:
            return (self.path / "cgroup.events").read_text()
        except OSError:
            return ""

    def remove(self, *, timeout: float = EMPTY_TIMEOUT_S) -> None:
        """rmdir the group, children first (an engine may have made some); gone already is fine."""
        for directory, _, _ in sorted(os.walk(self.path), key=lambda e: -len(e[0])):
            _rmdir(directory, timeout)

    def close(self, *, timeout: float = EMPTY_TIMEOUT_S) -> list[int]:
        held = self.kill(timeout=timeout)
        self.remove(timeout=timeout)
        return held


def _rmdir(directory: str, timeout: float) -> None:
    # A group just emptied can answer EBUSY for a moment.
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(directory)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise errors.EnvironmentProblem(
                    f"cannot remove cgroup {directory}: {error.strerror}"
                ) from None
            time.sleep(POLL_S)


def _wait(condition: object, timeout: float) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def owner(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the crashcert that made group `name`; None: not one of ours."""
    if not name.startswith(PREFIX):
        return None
    parts = name[len(PREFIX) :].split("-", 2)
    if len(parts) < 3 or not all(p.isdigit() and len(p) <= 20 for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def remove_stale(parent: pathlib.Path) -> list[str]:
    """Groups of a crashcert that died without closing them (SIGKILL, OOM): their processes
    are killed and the groups removed. A group whose owner lives (same pid, same start time)
    is left alone, and so is anything not named as ours or owned by another user."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        made_by = owner(entry.name)
        if made_by is None or start_time(made_by[0]) == made_by[1]:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                continue
            Group(pathlib.Path(entry.path)).close()
        except (OSError, errors.EnvironmentProblem):
            continue  # another crashcert got there first, or it will be tried next time
        removed.append(entry.path)
    return removed
