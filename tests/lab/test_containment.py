"""A trial's containment (harness/lab/containment.py): faults still act on a worker's process
group alone; teardown kills what the workers left (a double-forked daemon); without a
writable cgroup the sweep does it by the trial's mark and spares other processes; a
crashcert killed by SIGKILL leaves a group the next trial empties and removes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from harness.lab import cgroups, containment, processes
from tests.hostile import daemon_engine

pytestmark = pytest.mark.processes

REPO = pathlib.Path(__file__).resolve().parents[2]
# A worker that starts a daemon (fork, setsid, fork; it keeps the environment), then waits.
WORKER = (
    "import os, time\n"
    "from tests.hostile import daemon_engine\n"
    f"daemon_engine.start_daemon(os.environ[{daemon_engine.PIDS_VARIABLE!r}])\n"
    "time.sleep(600)\n"
)


def _env(pids_file: pathlib.Path, worker_id: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        daemon_engine.PIDS_VARIABLE: str(pids_file),
        "CRASHCERT_WORKER_ID": worker_id,
    }


def _daemon_of(pids_file: pathlib.Path) -> int:
    assert processes.wait_until(lambda: pids_file.exists() and pids_file.read_text(), timeout=30)
    (pid,) = [int(line) for line in pids_file.read_text().split()]
    return pid


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _status(pid: int) -> str:
    return str(psutil.Process(pid).status())


@pytest.fixture
def writable() -> None:
    found = cgroups.find_parent()
    if found.path is None:
        pytest.skip(f"cgroup v2 is not writable here: {found.reason}")


@pytest.fixture
def no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroups, "find_parent", lambda: cgroups.Parent(None, "test: none"))


def test_faults_act_on_the_group_alone_and_teardown_ends_the_rest(
    writable: None, tmp_path: pathlib.Path
) -> None:
    held = containment.Containment("t1", worker_prefix="t1-")
    assert held.mode == containment.CGROUP
    try:
        pids_file = tmp_path / "daemons"
        worker = processes.Worker(
            "t1-w1",
            [sys.executable, "-c", WORKER],
            env=_env(pids_file, "t1-w1"),
            log_dir=tmp_path,
            containment=held,
        )
        daemon = _daemon_of(pids_file)
        assert held.group is not None and {worker.pid, daemon} <= set(held.group.pids())
        worker.pause()  # SIGSTOP of the worker's group: its daemon is in no such group
        assert processes.wait_until(lambda: _status(worker.pid) == "stopped", timeout=10)
        assert _status(daemon) != "stopped"
        worker.resume()
        worker.kill()
        assert worker.returncode == -9
        assert not _dead(daemon)  # a kill fault is a kill of the group, as before
        held.close()
        assert processes.wait_until(lambda: _dead(daemon), timeout=10)
        assert held.describe() == "cgroup v2; 1 process(es) left by the workers killed at teardown"
        assert not held.group.path.exists()
    finally:
        held.close()


def test_without_a_cgroup_the_sweep_kills_what_carries_the_trials_mark_only(
    no_cgroup: None, tmp_path: pathlib.Path
) -> None:
    held = containment.Containment("t2", worker_prefix="t2-")
    assert held.mode == containment.SWEEP and held.procs_file is None
    bystander = subprocess.Popen(
        ["sleep", "600"], start_new_session=True, env=_env(tmp_path / "x", "t20-w1")
    )
    try:
        pids_file = tmp_path / "daemons"
        worker = processes.Worker(
            "t2-w1",
            [sys.executable, "-c", WORKER],
            env=_env(pids_file, "t2-w1"),
            log_dir=tmp_path,
            containment=held,
        )
        daemon = _daemon_of(pids_file)
        worker.terminate()
        assert not _dead(daemon)
        held.close()
        assert processes.wait_until(lambda: _dead(daemon), timeout=10)
        assert bystander.poll() is None  # another trial's worker id: t20-, not t2-
        assert held.describe() == (
            "session and environment sweep (test: none); "
            "1 process(es) left by the workers killed at teardown"
        )
    finally:
        held.close()
        bystander.kill()
        bystander.wait()


# A crashcert stand-in: one contained exec'd worker (no parent-death signal) that starts a
# daemon; prints both pids, then waits for its SIGKILL.
KILLED_HARNESS = textwrap.dedent(
    """
    import json, os, pathlib, sys, time
    from harness.lab import containment, processes
    directory = pathlib.Path(sys.argv[1])
    held = containment.Containment("killed", worker_prefix="killed-")
    worker = processes.Worker("killed-w1", [sys.executable, "-c", sys.argv[2]],
                              env=os.environ, log_dir=directory, containment=held)
    pids = directory / "daemons"
    while not (pids.exists() and pids.read_text()):
        time.sleep(0.01)
    print(json.dumps({"group": str(held.group.path), "worker": worker.pid,
                      "daemon": int(pids.read_text())}), flush=True)
    time.sleep(600)
    """
)


def test_the_group_of_a_sigkilled_crashcert_is_emptied_by_the_next(
    writable: None, tmp_path: pathlib.Path
) -> None:
    harness = subprocess.Popen(
        [sys.executable, "-c", KILLED_HARNESS, str(tmp_path), WORKER],
        env=_env(tmp_path / "daemons", "killed-w1"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert harness.stdout is not None
    left = json.loads(harness.stdout.readline())
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    harness.stdout.close()
    try:
        assert not _dead(left["worker"]) and not _dead(left["daemon"])  # what SIGKILL leaves
        assert pathlib.Path(left["group"]).exists()
        containment.Containment("next", worker_prefix="next-").close()  # the next trial
        assert processes.wait_until(
            lambda: _dead(left["worker"]) and _dead(left["daemon"]), timeout=10
        )
        assert not pathlib.Path(left["group"]).exists()
    finally:
        for pid in (left["worker"], left["daemon"]):
            if not _dead(pid):
                os.kill(pid, signal.SIGKILL)
