"""Certain cleanup of real parts: at exit, on SIGTERM/SIGHUP, and (via `with`) on exceptions.

Ctrl-C raises KeyboardInterrupt in the main thread, so `with` blocks unwind and atexit runs.
SIGTERM and SIGHUP would kill Python without either; the handler installed here runs every
registered cleanup first, then hands the signal on (previous handler, or default death).
Cleanups must be idempotent: one may run again while the main thread is half-way through it.
Generic on purpose: the Toxiproxy server registers here too.
"""

from __future__ import annotations

import atexit
import itertools
import os
import signal
import sys
import threading
import types
import typing

Cleanup = typing.Callable[[], None]
Handler = typing.Callable[[int, types.FrameType | None], typing.Any] | int | None

TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_lock = threading.RLock()
_cleanups: dict[int, Cleanup] = {}
_ids = itertools.count(1)
_owner_pid: int | None = None
_signals_installed = False
_previous: dict[int, Handler] = {}


def register(cleanup: Cleanup) -> int:
    """Run `cleanup` at exit or on a terminating signal unless unregistered first."""
    with _lock:
        _install()
        key = next(_ids)
        _cleanups[key] = cleanup
        return key


def unregister(key: int) -> None:
    with _lock:
        _cleanups.pop(key, None)


def run_all() -> None:
    """Run every registered cleanup, newest first; errors are reported, never raised."""
    # A forked child inherits the registry but owns none of these resources.
    if os.getpid() != _owner_pid:
        return
    with _lock:
        pending = sorted(_cleanups.items(), reverse=True)
    for key, cleanup in pending:
        try:
            cleanup()
        except Exception as exc:  # cleanup must go on for the others
            print(f"crashcert: cleanup failed: {exc!r}", file=sys.stderr)
        unregister(key)


def _install() -> None:
    global _owner_pid, _signals_installed
    if _owner_pid != os.getpid():
        _owner_pid = os.getpid()
        _signals_installed = False
        atexit.register(run_all)
    if _signals_installed or threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still applies
    _signals_installed = True
    for signum in TERMINATING_SIGNALS:
        current = signal.getsignal(signum)
        if current == signal.SIG_IGN:
            continue  # someone chose to ignore it (e.g. nohup); respect that
        if getattr(current, "crashcert_stop", False):
            continue  # handled as Ctrl-C (harness/trial/interrupt.py): unwinding cleans up
        _previous[signum] = current
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: types.FrameType | None) -> None:
    run_all()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    # Default action: die by the same signal so the exit status tells the truth.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
