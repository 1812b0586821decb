"""Worker processes: own process group, group kill confirmed, nothing left behind."""

from __future__ import annotations

import os
import sys

import psutil

from harness import processes

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
        text = worker.log_path.read_text().strip()
        if text:
            found.append(int(text.split()[0]))
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


def test_pause_and_resume(tmp_path):
    worker = processes.Worker(
        "w1", [sys.executable, "-c", "import time; time.sleep(600)"], env=os.environ, log_dir=tmp_path
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
