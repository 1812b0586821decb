"""The cgroup v2 helper (harness/lab/cgroups.py): where groups go, and a group created,
entered (by exec and by the fork server), killed (cgroup.kill, or freeze and SIGKILL) and
removed; stale groups of a dead crashcert removed, no others. The cases that make groups
skip, saying why, where cgroup v2 is not writable (no root, no delegation)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psutil
import pytest

from harness.lab import cgroups, processes, spawner

pytestmark = pytest.mark.processes

# Forks, calls setsid, forks again, then becomes `sleep` with an empty environment: outside
# the starter's session and group, reparented to init, carrying no mark but its cgroup.
DAEMON = (
    "import os, sys\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        with open(sys.argv[1], 'a') as out:\n"
    "            out.write(f'{os.getpid()}\\n')\n"
    "        os.execve('/bin/sleep', ['sleep', '600'], {})\n"
    "    os._exit(0)\n"
    "os.wait()\n"
    "os.execv('/bin/sleep', ['sleep', '600'])\n"
)


@pytest.fixture
def parent() -> pathlib.Path:
    found = cgroups.find_parent()
    if found.path is None:
        pytest.skip(f"cgroup v2 is not writable here: {found.reason}")
    return found.path


@pytest.fixture
def group(parent: pathlib.Path) -> Iterator[cgroups.Group]:
    made = cgroups.Group.create(parent, cgroups.own_name(f"test-{uuid.uuid4().hex[:8]}"))
    yield made
    made.close()  # whatever a failed test left


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _start_daemon(group: cgroups.Group, pids_file: pathlib.Path) -> subprocess.Popen[bytes]:
    starter = subprocess.Popen(
        cgroups.enter_argv([sys.executable, "-c", DAEMON, str(pids_file)], group.procs_file),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    assert processes.wait_until(lambda: pids_file.exists() and pids_file.read_text(), timeout=30)
    return starter


def _members(group: cgroups.Group, pids: list[int]) -> None:
    assert processes.wait_until(lambda: set(pids) <= set(group.pids()), timeout=10), (
        pids,
        group.pids(),
    )


@pytest.mark.parametrize("use_kill_file", [True, False], ids=["cgroup.kill", "freeze+SIGKILL"])
def test_a_group_holds_a_double_forked_daemon_and_kill_ends_it(
    group: cgroups.Group, tmp_path: pathlib.Path, use_kill_file: bool
) -> None:
    starter = _start_daemon(group, tmp_path / "pids")
    (daemon,) = [int(line) for line in (tmp_path / "pids").read_text().split()]
    _members(group, [starter.pid, daemon])
    assert os.getsid(daemon) != starter.pid  # no session or group kill reaches it
    held = group.kill(use_kill_file=use_kill_file)
    assert {starter.pid, daemon} <= set(held)
    assert starter.wait(10) == -9
    assert processes.wait_until(lambda: _dead(daemon), timeout=10)
    assert group.pids() == []
    group.remove()
    assert not group.path.exists()


def test_a_forked_worker_enters_its_group_before_the_server_answers(
    group: cgroups.Group, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    server = spawner.ForkServer([])
    try:
        pid = server.spawn(
            "sleeper",
            [],
            env={"PATH": os.environ["PATH"]},
            cwd=str(tmp_path),
            log=str(tmp_path / "log"),
            cgroup_procs=group.procs_file,
        )
        assert pid in group.pids()  # at once: no fork of the worker can precede it
        assert group.kill() == [pid]
        assert processes.wait_until(lambda: _dead(pid), timeout=10)
    finally:
        server.close()


def test_remove_takes_child_groups_too(group: cgroups.Group) -> None:
    (group.path / "inner").mkdir()
    group.remove()
    assert not group.path.exists()


def test_stale_groups_of_a_dead_owner_are_emptied_and_removed_and_no_others(
    parent: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    tag = uuid.uuid4().hex[:8]
    # A parent of the test's own (not named like a group of ours): no other crashcert
    # sweeping the real parent at the same time touches what this test made.
    private = cgroups.Group.create(parent, f"test-{tag}")
    parent = private.path
    stale = cgroups.Group.create(parent, f"{cgroups.PREFIX}{dead.pid}-1-{tag}")
    # our pid with another start time: the pid was reused, the owner is gone
    reused = cgroups.Group.create(parent, f"{cgroups.PREFIX}{os.getpid()}-1-{tag}")
    live = cgroups.Group.create(parent, cgroups.own_name(tag))
    foreign = cgroups.Group.create(parent, f"not-ours-{tag}")
    try:
        starter = _start_daemon(stale, tmp_path / "pids")
        (daemon,) = [int(line) for line in (tmp_path / "pids").read_text().split()]
        _members(stale, [starter.pid, daemon])
        removed = cgroups.remove_stale(parent)
        assert str(stale.path) in removed and str(reused.path) in removed
        assert str(live.path) not in removed and str(foreign.path) not in removed
        assert not stale.path.exists() and not reused.path.exists()
        assert live.path.exists() and foreign.path.exists()
        assert starter.wait(10) == -9
        assert processes.wait_until(lambda: _dead(daemon), timeout=10)
    finally:
        private.close()


def test_the_owner_is_read_from_the_name_only_when_it_is_ours() -> None:
    assert cgroups.owner("cc-123-456-abc-def") == (123, 456)
    for name in ("cc-123-abc", "cc-x-1-a", "crashcert", "cc-1-2", "xcc-1-2-a"):
        assert cgroups.owner(name) is None, name
    assert cgroups.owner(cgroups.own_name("t")) == (os.getpid(), cgroups.start_time(os.getpid()))


def test_without_cgroup_v2_the_parent_says_why(tmp_path: pathlib.Path) -> None:
    v1_only = tmp_path / "mountinfo"
    v1_only.write_text(
        "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n"
    )
    membership = tmp_path / "cgroup"
    membership.write_text("0::/\n")
    found = cgroups.find_parent(mountinfo=str(v1_only), membership=str(membership))
    assert found.path is None and "no cgroup v2" in found.reason
    hybrid = tmp_path / "mountinfo2"
    hybrid.write_text(
        "35 25 0:31 /jail /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    found = cgroups.find_parent(mountinfo=str(hybrid), membership=str(membership))
    assert found.path is None and "outside the mounted hierarchy" in found.reason
    membership.write_text("1:cpu:/\n")
    found = cgroups.find_parent(mountinfo=str(hybrid), membership=str(membership))
    assert found.path is None and "in no cgroup v2" in found.reason
