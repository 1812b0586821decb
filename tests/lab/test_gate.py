"""A trial that restarts Postgres runs alone (harness/lab/gate.py)."""

from __future__ import annotations

import threading

from harness.lab import gate

WAIT_S = 5.0


def test_an_exclusive_holder_waits_for_the_shared_ones_and_keeps_new_ones_out() -> None:
    shared = gate.SharedExclusive()
    order: list[str] = []
    first_in, release_first, exclusive_in, release_exclusive = (threading.Event() for _ in "1234")

    def shared_holder(name: str, entered: threading.Event | None, leave: threading.Event) -> None:
        with shared.hold(exclusive=False):
            order.append(f"{name} in")
            if entered:
                entered.set()
            leave.wait(WAIT_S)
            order.append(f"{name} out")

    def exclusive_holder() -> None:
        with shared.hold(exclusive=True):
            order.append("exclusive in")
            exclusive_in.set()
            release_exclusive.wait(WAIT_S)
            order.append("exclusive out")

    first = threading.Thread(target=shared_holder, args=("first", first_in, release_first))
    first.start()
    assert first_in.wait(WAIT_S)
    alone = threading.Thread(target=exclusive_holder)
    alone.start()
    assert not exclusive_in.wait(0.2)  # a shared holder is still inside
    release_first.set()
    assert exclusive_in.wait(WAIT_S)
    leave_at_once = threading.Event()
    leave_at_once.set()
    late = threading.Thread(target=shared_holder, args=("late", None, leave_at_once))
    late.start()
    late.join(0.2)
    assert late.is_alive() and "late in" not in order  # kept out while the exclusive runs
    release_exclusive.set()
    for thread in (first, alone, late):
        thread.join(WAIT_S + 1)
    assert order == [
        "first in",
        "first out",
        "exclusive in",
        "exclusive out",
        "late in",
        "late out",
    ]


def test_a_downgraded_holder_lets_shared_ones_in_and_still_keeps_an_exclusive_out() -> None:
    shared = gate.SharedExclusive()
    entered, downgrade, leave = threading.Event(), threading.Event(), threading.Event()
    inside: list[str] = []

    def restarting() -> None:
        with shared.hold(exclusive=True) as held:
            inside.append("restart")
            entered.set()
            downgrade.wait(WAIT_S)
            held.downgrade()
            held.downgrade()  # twice is once
            leave.wait(WAIT_S)

    def holder(name: str, exclusive: bool) -> None:
        with shared.hold(exclusive=exclusive):
            inside.append(name)

    first = threading.Thread(target=restarting)
    first.start()
    assert entered.wait(WAIT_S)
    beside = threading.Thread(target=holder, args=("beside", False))
    beside.start()
    beside.join(0.2)
    assert beside.is_alive()  # Postgres is still down: kept out
    downgrade.set()
    beside.join(WAIT_S)
    assert not beside.is_alive() and inside == ["restart", "beside"]
    other_restart = threading.Thread(target=holder, args=("other restart", True))
    other_restart.start()
    other_restart.join(0.2)
    assert other_restart.is_alive()  # the downgraded holder is still inside
    leave.set()
    for thread in (first, other_restart):
        thread.join(WAIT_S)
    assert inside == ["restart", "beside", "other restart"]
    assert (shared._shared, shared._exclusive) == (0, False)
