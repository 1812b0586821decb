"""A black-box engine sends no run.finished: the runner asks for reports. When the world
sees the reply arrive, the run is about to end, so the runner asks at once and then backs
off again, instead of waiting out a full poll (harness/trial/runner.py)."""

from __future__ import annotations

import time
from typing import Any

from harness.contract import run_report
from harness.nemesis import world_trigger
from harness.record import history
from harness.trial import runner


class _Server:
    """Answers wait_for from a script: a hit at the n-th wait, else a timeout."""

    def __init__(self, reply_at_wait: int) -> None:
        self.reply_at_wait = reply_at_wait
        self.timeouts: list[float] = []
        self.reply = history.BoundaryHit(
            t=time.time(),
            point=world_trigger.REPLY_ACCEPTED,
            occurrence=1,
            run_id=None,
            worker_id=None,
            pid=None,
        )

    def wait_for(self, predicate: Any, *, timeout: float) -> history.BoundaryHit | None:
        self.timeouts.append(timeout)
        if len(self.timeouts) >= self.reply_at_wait and predicate(self.reply):
            return self.reply
        return None


class _Engine:
    boundaries: tuple[str, ...] = ()

    def __init__(self, terminal_after: int) -> None:
        self.asked = 0
        self.terminal_after = terminal_after

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        self.asked += 1
        status = "succeeded" if self.asked >= self.terminal_after else "running"
        return run_report.RunReport.model_construct(run_id=run_id, status=status)


class _Workers:
    def all(self) -> list[Any]:
        return []


class _Launcher:
    workers = _Workers()


class _Actor:
    waiting = False


def _wait(server: _Server, engine: _Engine) -> history.TrialHistory:
    trial = history.TrialHistory.model_construct(run_id="run-1", reports=[], finished_at=None)
    runner._poll_until_terminal(
        engine,
        "dsn",
        trial,
        server,  # type: ignore[arg-type]
        _Launcher(),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        time.monotonic() + 60,
        _Actor(),  # type: ignore[arg-type]
    )
    return trial


def test_a_reply_in_the_world_makes_the_runner_ask_at_once_then_back_off() -> None:
    server = _Server(reply_at_wait=3)
    engine = _Engine(terminal_after=7)
    trial = _wait(server, engine)
    assert trial.finished_at is not None
    full = runner.BLACK_BOX_POLL_S
    first = runner.FIRST_ASK_S
    # two full polls, the reply (asked at once), then 0.05, 0.1, 0.2, 0.4 ... up to a full poll
    assert server.timeouts[:3] == [full, full, full]
    assert server.timeouts[3:] == [first, 2 * first, 4 * first, 8 * first]
    assert engine.asked == 7


def test_the_same_reply_is_not_taken_for_a_new_one() -> None:
    server = _Server(reply_at_wait=1)
    engine = _Engine(terminal_after=12)
    _wait(server, engine)
    # one reply: one burst of quick asks, then back to full polls
    assert server.timeouts[-1] == runner.BLACK_BOX_POLL_S
    assert server.timeouts.count(runner.FIRST_ASK_S) == 1


def test_without_a_reply_the_runner_polls_at_the_black_box_pace() -> None:
    server = _Server(reply_at_wait=10**6)
    engine = _Engine(terminal_after=4)
    _wait(server, engine)
    assert server.timeouts == [runner.BLACK_BOX_POLL_S] * 4
