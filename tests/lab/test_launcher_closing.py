"""A fault strike may start a fresh worker while the trial is closing (a kill at run.finished
is applied in the control thread as the runner tears down): the launcher then refuses, so no
worker outlives the trial unseen, and close() stops one started just before it."""

from __future__ import annotations

import pathlib
import sys
import threading
import types
from typing import Any

import pytest

from harness import errors
from harness.lab import launcher as launcher_module
from harness.record import recorder as recorder_module

pytestmark = pytest.mark.processes


def _launcher(tmp_path: pathlib.Path, on_dsn: Any = None) -> launcher_module.Launcher:
    engine: Any = types.SimpleNamespace(
        worker_env=dict,
        lease_ms=300,
        cwd=None,
        worker_command=lambda: [sys.executable, "-c", "import time; time.sleep(60)"],
    )

    def dsn_for(worker_id: str) -> str:
        if on_dsn is not None:
            on_dsn()
        return "postgresql://127.0.0.1/x"

    return launcher_module.Launcher(
        engine,
        world_env={},
        control_path=None,
        dsn_for_worker=dsn_for,
        log_dir=tmp_path,
        recorder=recorder_module.Recorder(None),
        trial_id="t",
    )


def test_no_worker_starts_after_close(tmp_path: pathlib.Path) -> None:
    launcher = _launcher(tmp_path)
    first = launcher.start()
    launcher.close()
    assert not first.alive
    with pytest.raises(errors.CrashcertError, match="no new worker"):
        launcher.start()
    assert launcher.workers.all() == [first]


def test_close_waits_for_a_start_in_progress_and_stops_it(tmp_path: pathlib.Path) -> None:
    starting, go_on = threading.Event(), threading.Event()

    def slow_dsn() -> None:
        starting.set()
        go_on.wait(10)

    launcher = _launcher(tmp_path, on_dsn=slow_dsn)
    started: list[Any] = []
    thread = threading.Thread(target=lambda: started.append(launcher.start()))
    thread.start()
    assert starting.wait(10)
    closer = threading.Thread(target=launcher.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # it waits for the start that is under way
    go_on.set()
    thread.join(10)
    closer.join(30)
    assert not closer.is_alive()
    assert len(started) == 1 and not started[0].alive  # stopped by that close


def test_refill_starts_a_worker_only_into_an_empty_open_pool(tmp_path: pathlib.Path) -> None:
    """A kill's or a term's refill, as a supervisor: one fresh worker when none is alive,
    none beside a live one, and none once the trial is closing (a term's grace can end at
    teardown; that used to raise in the heal's thread and lose the grace's record)."""
    launcher = _launcher(tmp_path)
    try:
        first = launcher.refill()
        assert first is not None and first.alive
        assert launcher.refill() is None
        first.kill()
        second = launcher.refill()
        assert second is not None and second.worker_id != first.worker_id
    finally:
        launcher.close()
    assert launcher.refill() is None
    assert len(launcher.workers.all()) == 2
