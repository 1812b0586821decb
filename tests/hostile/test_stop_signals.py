"""SIGTERM and SIGHUP stop a command as Ctrl-C does (issue 33): KeyboardInterrupt in the main
thread with the stop flag already set, the reaper's kill-everything handler kept out of the
way, and no trial started after the stop."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from harness.lab import reaper
from harness.trial import interrupt


@pytest.fixture
def stop_handlers() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in interrupt.STOP_SIGNALS}
    for signum in interrupt.STOP_SIGNALS:
        # pytest under nohup inherits SIGHUP ignored, and stop_on_signals keeps that choice
        signal.signal(signum, signal.SIG_DFL)
    interrupt.stop_on_signals()
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
        interrupt._requested.clear()


@pytest.mark.parametrize("signum", interrupt.STOP_SIGNALS)
def test_a_stop_signal_is_a_keyboard_interrupt_with_the_flag_set(
    stop_handlers: None, signum: int
) -> None:
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signum)
        signal.sigtimedwait([], 0)  # a point where the handler has surely run
    assert interrupt.requested()


def test_a_signal_ignored_by_the_parent_stays_ignored() -> None:
    saved = signal.getsignal(signal.SIGHUP)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as `nohup crashcert ...` starts it
    try:
        interrupt.stop_on_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, saved)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_the_reaper_leaves_a_stop_signal_to_the_unwinding(stop_handlers: None) -> None:
    key = reaper.register(lambda: None)
    try:
        assert signal.getsignal(signal.SIGTERM) is interrupt._on_stop
    finally:
        reaper.unregister(key)


def test_no_trial_starts_after_the_stop(stop_handlers: None) -> None:
    started: list[int] = []
    release = threading.Event()

    def trial(item: int) -> int:
        started.append(item)
        if item == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the main thread waits in the pool
            release.wait(5)
        return item

    timer = threading.Timer(0.5, release.set)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupt.run_pool(trial, [1, 2, 3, 4], jobs=1)
    finally:
        timer.cancel()
        release.set()
    assert started == [1]
