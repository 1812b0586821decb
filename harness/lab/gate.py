"""Trials sharing one Postgres run side by side, except one that restarts it: that runs alone
until Postgres is back.

A restart kills every connection on the server, so a trial running next to it would see
its own database vanish mid-setup and end as a harness ERROR through no fault of its engine.
Once the restart healed and the trial stops Postgres no more, the rest of it (recovery,
teardown, checks: for a hung engine, its whole deadline) strikes nobody, so it `downgrade`s
to a shared holder and the other trials go on beside it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Held:
    """One holder's place in the gate."""

    def __init__(self, gate: SharedExclusive, *, exclusive: bool) -> None:
        self._gate = gate
        self.exclusive = exclusive

    def downgrade(self) -> None:
        """From alone to beside the others; a shared holder stays as it is."""
        self._gate.downgrade(self)


class SharedExclusive:
    """Many holders at once, or one exclusive holder alone."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared = 0
        self._exclusive = False

    def downgrade(self, held: Held) -> None:
        with self._condition:
            if not held.exclusive:
                return
            held.exclusive = False
            self._exclusive = False
            self._shared += 1
            self._condition.notify_all()

    @contextlib.contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[Held]:
        with self._condition:
            if exclusive:
                self._condition.wait_for(lambda: not self._exclusive and self._shared == 0)
                self._exclusive = True
            else:
                self._condition.wait_for(lambda: not self._exclusive)
                self._shared += 1
        held = Held(self, exclusive=exclusive)
        try:
            yield held
        finally:
            with self._condition:
                if held.exclusive:
                    self._exclusive = False
                else:
                    self._shared -= 1
                self._condition.notify_all()
