"""Recorder.wait_for: a waiter finds the first matching hit, recorded before or during its
wait, and looks at each hit once per wait (a long run records hundreds of hits, and the
trial loop waits on every one of them)."""

from __future__ import annotations

import threading

from harness.record import history, recorder


def _hit(point: str, occurrence: int) -> history.BoundaryHit:
    return history.BoundaryHit(
        seq=0, t=0.0, point=point, occurrence=occurrence, run_id="r", worker_id="w", pid=1
    )


def test_finds_a_hit_recorded_before_the_wait() -> None:
    rec = recorder.Recorder()
    rec.append(_hit("run.claimed", 1))
    found = rec.wait_for(lambda hit: hit.point == "run.claimed", timeout=0.01)
    assert found is not None and found.point == "run.claimed"


def test_each_hit_is_judged_once_per_wait() -> None:
    rec = recorder.Recorder()
    judged: list[int] = []
    started = threading.Event()

    def finished(hit: history.BoundaryHit) -> bool:
        started.set()
        judged.append(hit.seq)
        return hit.point == "run.finished"

    rec.append(_hit("run.claimed", 1))  # the waiter's first look wakes `started`
    found: list[history.BoundaryHit | None] = []
    waiter = threading.Thread(target=lambda: found.append(rec.wait_for(finished, timeout=10)))
    waiter.start()
    assert started.wait(10)
    for occurrence in range(1, 41):  # one wake-up each, as a worker's reports come in
        rec.append(_hit("model.pending", occurrence))
    rec.append(_hit("run.finished", 1))
    waiter.join(10)
    assert found and found[0] is not None and found[0].point == "run.finished"
    # 42 hits, each judged once: rescanning from the first hit at every wake-up judged
    # them up to 42 * 43 / 2 times
    assert sorted(judged) == sorted(set(judged))
    assert len(judged) == 42


def test_times_out_with_none_when_no_hit_matches() -> None:
    rec = recorder.Recorder()
    rec.append(_hit("run.claimed", 1))
    assert rec.wait_for(lambda hit: hit.point == "run.finished", timeout=0.05) is None
