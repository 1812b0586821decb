"""Worker processes: own process group, group kill confirmed, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from harness.lab import processes

pytestmark = pytest.mark.processes  # starts real subprocesses: the flake hunt runs it

# A worker that starts a child and then waits forever: a kill must take both.
PARENT_WITH_CHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _child_pid(worker: processes.Worker) -> int:
    found: list[int] = []

    def ready() -> bool:
        own = [
            line
            for line in worker.log_path.read_text().splitlines()
            if line.strip() and not line.startswith(processes.NOTE_PREFIX)
        ]
        if own:
            found.append(int(own[0].split()[0]))
        return bool(found)

    assert processes.wait_until(ready, timeout=10)
    return found[0]


def test_kill_takes_the_whole_group(tmp_path):
    worker = processes.Worker(
        "w1", [sys.executable, "-c", PARENT_WITH_CHILD], env=os.environ, log_dir=tmp_path
    )
    assert os.getpgid(worker.pid) == worker.pid  # its own group
    child = _child_pid(worker)
    worker.kill()
    assert not worker.alive
    assert worker.returncode == -9
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_the_log_says_what_the_harness_did_to_a_silent_worker(tmp_path):
    """A worker that prints nothing still leaves a log: started how, which signals, exit."""
    worker = processes.Worker(
        "w1",
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env=os.environ,
        log_dir=tmp_path,
    )
    worker.pause()
    worker.resume()
    worker.kill()
    notes = [line for line in worker.log_path.read_text().splitlines()]
    assert all(line.startswith(processes.NOTE_PREFIX) for line in notes), notes
    text = "\n".join(notes)
    assert "worker w1:" in notes[0] and "exec'd" in notes[0], text
    assert f"started as pid {worker.pid}" in notes[1], text
    for expected in ("SIGSTOP", "SIGCONT", "SIGKILL", f"pid {worker.pid} killed by SIGKILL"):
        assert expected in text, text
    assert text.index("SIGSTOP") < text.index("SIGCONT") < text.index("SIGKILL to"), text


def test_pause_and_resume(tmp_path):
    worker = processes.Worker(
        "w1",
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env=os.environ,
        log_dir=tmp_path,
    )
    try:
        worker.pause()
        assert processes.wait_until(
            lambda: psutil.Process(worker.pid).status() == psutil.STATUS_STOPPED, timeout=5
        )
        worker.resume()
        assert processes.wait_until(
            lambda: psutil.Process(worker.pid).status() != psutil.STATUS_STOPPED, timeout=5
        )
    finally:
        worker.kill()


def test_worker_set_close_leaves_nothing(tmp_path):
    workers = processes.WorkerSet()
    started = [
        workers.add(
            processes.Worker(
                f"w{i}", [sys.executable, "-c", PARENT_WITH_CHILD], env=os.environ, log_dir=tmp_path
            )
        )
        for i in range(2)
    ]
    children = [_child_pid(worker) for worker in started]
    started[1].pause()  # a paused worker must not survive close() either
    workers.close()
    for worker in started:
        assert not worker.alive
    for pid in children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_forked_worker_is_its_own_group_and_dies_by_group_kill(tmp_path):
    from harness.lab import spawner

    server = spawner.ForkServer(["json"])
    try:
        (tmp_path / "wait_forever.py").write_text(
            "import os, time\nprint('marker', os.environ['MARKER'], flush=True)\ntime.sleep(600)\n"
        )
        worker = processes.Worker(
            "w1",
            [sys.executable, "-m", "wait_forever"],
            env={"PATH": os.environ["PATH"], "MARKER": "forked"},
            log_dir=tmp_path,
            cwd=str(tmp_path),
            forkserver=server,
        )
        assert isinstance(worker.process, spawner.ForkedProcess)
        assert os.getpgid(worker.pid) == worker.pid
        assert processes.wait_until(
            lambda: "marker forked" in worker.log_path.read_text(), timeout=10
        )
        assert worker.alive
        worker.kill()
        assert not worker.alive
        assert worker.returncode == -9
    finally:
        server.close()


def test_forked_worker_exit_code_and_log(tmp_path):
    from harness.lab import spawner

    module = tmp_path / "say_and_exit.py"
    module.write_text("import sys\nprint('hello from', sys.argv[1:])\nsys.exit(3)\n")
    server = spawner.ForkServer([])
    try:
        worker = processes.Worker(
            "w1",
            [sys.executable, "-m", "say_and_exit", "a", "b"],
            env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)},
            log_dir=tmp_path,
            cwd=str(tmp_path),
            forkserver=server,
        )
        assert processes.wait_until(lambda: not worker.alive, timeout=10)
        assert worker.returncode == 3
        worker.reap(timeout=5)
        assert "hello from ['a', 'b']" in worker.log_path.read_text()
    finally:
        server.close()


# A stand-in harness: starts one exec'd and one forked worker, prints their pids, waits.
HARNESS = """
import os, pathlib, sys, time
from harness.lab import processes, spawner
log_dir = pathlib.Path(sys.argv[1])
server = spawner.ForkServer([])
pathlib.Path(log_dir, 'sleeper.py').write_text('import time\\ntime.sleep(600)\\n')
env = {'PATH': os.environ['PATH']}
execd = processes.Worker('e', [sys.executable, '-c', 'import time; time.sleep(600)'],
                         env=env, log_dir=log_dir)
forked = processes.Worker('f', [sys.executable, '-m', 'sleeper'], env=env, log_dir=log_dir,
                          cwd=str(log_dir), forkserver=server)
print(execd.pid, forked.pid, flush=True)
time.sleep(600)
"""


def _harness_pids(tmp_path):
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert harness.stdout is not None
    execd, forked = (int(pid) for pid in harness.stdout.readline().split())
    return harness, execd, forked


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_terminated_harness_leaves_no_worker(tmp_path):
    harness, execd, forked = _harness_pids(tmp_path)
    harness.terminate()
    harness.wait(10)
    assert processes.wait_until(lambda: _gone(execd) and _gone(forked), timeout=10)


def test_a_killed_harness_leaves_no_forked_worker(tmp_path):
    harness, execd, forked = _harness_pids(tmp_path)
    harness.kill()
    harness.wait(10)
    try:
        # The fork server sees its stdin close and exits; its children die with it.
        assert processes.wait_until(lambda: _gone(forked), timeout=10)
    finally:
        os.kill(execd, 9)  # exec'd workers outlive a SIGKILLed harness (documented)
