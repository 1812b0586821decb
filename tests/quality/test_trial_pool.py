"""The quality modules' pool (trial_pool.py): every future gets its own result or error,
shutdown cancels what has not started, and nothing runs before start()."""

from __future__ import annotations

import threading

import pytest

from tests.quality import trial_pool


def test_each_future_gets_its_result_or_its_error() -> None:
    pool = trial_pool.TrialPool("auto")
    started = threading.Event()

    def work(item: int) -> int:
        started.set()
        if item == 3:
            raise ValueError("three")
        return item * 10

    futures = [pool.submit(work, item) for item in range(6)]
    assert not started.wait(0.05)  # submitted is not started
    pool.start()
    assert [f.result(timeout=10) for f in futures if f is not futures[3]] == [0, 10, 20, 40, 50]
    with pytest.raises(ValueError, match="three"):
        futures[3].result(timeout=10)
    pool.shutdown()
    assert pool.describe().startswith("auto (2 to ")
    with pytest.raises(RuntimeError):
        pool.submit(work, 7)


def test_shutdown_cancels_what_has_not_started() -> None:
    pool = trial_pool.TrialPool("1")
    release = threading.Event()
    running = threading.Event()

    def work(item: int) -> int:
        running.set()
        release.wait(10)
        return item

    futures = [pool.submit(work, item) for item in range(4)]
    with pool.running():
        assert running.wait(10)
        threading.Timer(0.1, release.set).start()
    # leaving it shut the pool down, once the running one ended
    assert futures[0].result(timeout=0) == 0
    assert all(f.cancelled() for f in futures[1:])


def test_a_trial_submitted_beside_runs_outside_the_pools_slots() -> None:
    pool = trial_pool.TrialPool("1")  # one slot
    hung_in, release = threading.Event(), threading.Event()

    def hung() -> str:
        hung_in.set()
        release.wait(10)
        return "hung"

    waiting = pool.submit_beside(hung)
    quick = [pool.submit(lambda item: item, item) for item in range(3)]
    assert not hung_in.is_set()  # nothing before start()
    pool.start()
    assert hung_in.wait(10)
    assert [future.result(timeout=10) for future in quick] == [0, 1, 2]  # not behind it
    assert not waiting.done()
    release.set()
    assert waiting.result(timeout=10) == "hung"
    pool.shutdown()
