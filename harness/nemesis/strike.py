"""One fault carried out: what every fault kind is given, and the interface they share.

Like Chaos Mesh's Apply/Recover and etcd's Failpoint.Inject, each kind of fault
(harness/nemesis/kinds.py) is one object with one method, `apply`: it breaks something
for the worker held at the boundary, records what it did, and hands back how to heal it.
When to heal (a delay, a later point, the trial's end) is the nemesis's business.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, Protocol

from harness.faults import spec
from harness.lab import launcher as launcher_module
from harness.lab import postgres
from harness.record import history
from harness.record import recorder as recorder_module

Heal = Callable[[], None]


class Holds:
    """Hits a fault asked to hold: the worker that reports one stays blocked at it (its
    control line unanswered) while the fault's `wait` runs, on that worker's control thread.
    Each hold is taken by the first hit that matches it, once; `wait` must be bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[
            tuple[Callable[[history.BoundaryHit], bool], Callable[[history.BoundaryHit], None]]
        ] = []

    def add(
        self,
        matches: Callable[[history.BoundaryHit], bool],
        wait: Callable[[history.BoundaryHit], None],
    ) -> Callable[[], None]:
        """Hold the first hit that `matches`; returns what drops the hold if none came."""
        item = (matches, wait)
        with self._lock:
            self._items.append(item)

        def drop() -> None:
            with self._lock:
                self._items = [other for other in self._items if other is not item]

        return drop

    def run(self, hit: history.BoundaryHit) -> None:
        with self._lock:
            due = [item for item in self._items if item[0](hit)]
            self._items = [item for item in self._items if not any(item is d for d in due)]
        for _, wait in due:
            wait(hit)


class NotApplied(Exception):
    """The fault could not strike here (no proxy, no skewable clock): recorded, not raised."""


@dataclasses.dataclass(frozen=True)
class Parts:
    """The live trial a fault acts on; the same for every strike of one trial."""

    launcher: launcher_module.Launcher
    recorder: recorder_module.Recorder
    proxies: Any  # proxy per worker (by_worker), or None without Toxiproxy
    pg: postgres.Server
    lease_s: float
    dsn: str | None = None  # the trial's database, read past every proxy
    world_links: Any | None = None  # harness.lab.world_links.WorldLinks
    clocks: Any | None = None  # harness.lab.faketime.Clocks
    store_links: Any | None = None  # harness.lab.store_links.StoreLinks: the engine's store
    world_tools: Any | None = None  # harness.world.tools.ToolServices: an upgrade redeploys
    failover: Any | None = None  # harness.lab.failover.Failover: the trial's standby
    holds: Holds = dataclasses.field(default_factory=Holds)


@dataclasses.dataclass(frozen=True)
class Strike:
    """One planned step meeting the hit it was planned for."""

    step: spec.FaultStep
    hit: history.BoundaryHit
    worker: Any  # the reporting worker; None only for a shared server's (spec.SHARED)
    parts: Parts

    def record(
        self, action: str, *, ok: bool, note: str, observed: dict[str, Any] | None = None
    ) -> None:
        self.parts.recorder.append(
            history.FaultApplied(
                action=action,
                planned=self.step,
                struck_at=spec.PointRef(point=self.hit.point, occurrence=self.hit.occurrence),
                worker_id=self.hit.worker_id,
                pid=self.hit.pid,
                ok=ok,
                note=note,
                observed=observed or {},
            )
        )


class FaultKind(Protocol):
    """One fault class's behaviour; whether it needs a worker is the catalog's word
    (`FaultClass.shared`: it strikes a server every worker shares)."""

    def apply(self, strike: Strike) -> Heal | None:
        """Break, record, and return the heal (None: nothing heals it, or it healed itself).
        Raise NotApplied when it cannot strike."""
        ...

    def heal_delay(self, strike: Strike) -> float | None:
        """Seconds until the heal, when the kind decides it (None: the nemesis's default)."""
        ...


class Kind:
    """Defaults most kinds share: healed when the nemesis says."""

    def heal_delay(self, strike: Strike) -> float | None:
        return None
