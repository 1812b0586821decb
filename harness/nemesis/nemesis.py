"""Faults: applied while a worker is held at a boundary. The nemesis decides no verdict.

The plan says which fault where (point and occurrence); the nemesis carries it out from the
control channel's thread while the reporting worker is blocked, through the fault's own kind
(harness/nemesis/kinds.py: what it breaks, what it records, how it heals), and heals what it
broke: after `params.heal_after_s`, when any worker reports `params.heal_at` (a point, e.g.
`tool.settled#1`; the deadline is then longer), or at the latest when the trial ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from harness import errors
from harness.contract import boundaries
from harness.faults import spec
from harness.lab import launcher as launcher_module
from harness.lab import postgres
from harness.nemesis import kinds
from harness.nemesis import strike as strike_module
from harness.record import history
from harness.record import recorder as recorder_module

log = logging.getLogger(__name__)

# Defaults, in leases: long enough for the lease to lapse and another worker to adopt.
DEFAULT_HEAL_LEASES = 2.5
# With `heal_at`, the deadline that heals anyway if the point never comes.
HEAL_AT_DEADLINE_LEASES = 10
# How long close() waits for a heal another thread is running (Toxiproxy calls, pg start).
HEAL_WAIT_S = 60.0

Heal = strike_module.Heal


def _never(step: spec.FaultStep) -> None:
    return None


class Nemesis:
    def __init__(
        self,
        plan: list[spec.FaultStep],
        *,
        launcher: launcher_module.Launcher,
        recorder: recorder_module.Recorder,
        proxies: Any,  # proxy per worker, or none without Toxiproxy
        pg: postgres.Server,
        lease_s: float,
        dsn: str | None = None,  # the trial's database, read past every proxy
        world_links: Any | None = None,  # harness.lab.world_links.WorldLinks
        clocks: Any | None = None,  # harness.lab.faketime.Clocks
        store_links: Any | None = None,  # harness.lab.store_links.StoreLinks
        world_tools: Any | None = None,  # harness.world.tools.ToolServices
        failover: Any | None = None,  # harness.lab.failover.Failover
        postgres_back: Callable[[], None] | None = None,
    ) -> None:
        # A lost response or a cut stream is the world's doing (world_trigger), not ours.
        self._pending = [step for step in plan if step.action in kinds.KINDS]
        # Called once no step of the plan will stop Postgres again and every stop healed
        # (harness/lab/gate.py: the trial stops running alone). A stop with no heal (a
        # failover: the lab's primary stays down) never calls it.
        self._postgres_back = postgres_back
        self._stops_unhealed = 0
        self._stays_down = False
        self._parts = strike_module.Parts(
            launcher=launcher,
            recorder=recorder,
            proxies=proxies,
            pg=pg,
            lease_s=lease_s,
            dsn=dsn,
            world_links=world_links,
            clocks=clocks,
            store_links=store_links,
            world_tools=world_tools,
            failover=failover,
        )
        # Steps whose kind prepares at an earlier hit (an asynchronous failover pauses WAL
        # shipping at the point's `:before_commit` twin): (step, (point, occurrence)).
        self._arming = [
            (step, (arm, step.occurrence))
            for step in self._pending
            if (arm := getattr(kinds.KINDS[step.action], "arm_point", _never)(step)) is not None
        ]
        self._lock = threading.Lock()
        self._heals: list[tuple[threading.Timer, Heal, str]] = []
        self._heal_at: list[tuple[tuple[str, int], Heal]] = []  # (point, occurrence), heal
        self._closed = False

    def on_hit(self, hit: history.BoundaryHit) -> None:
        """Control-channel policy: runs while the reporting worker is blocked."""
        with self._lock:
            mend = [heal for at, heal in self._heal_at if at == (hit.point, hit.occurrence)]
            self._heal_at = [item for item in self._heal_at if item[1] not in mend]
        for heal in mend:  # before this worker goes on
            heal()
        with self._lock:
            arming = [step for step, at in self._arming if at == (hit.point, hit.occurrence)]
            self._arming = [item for item in self._arming if item[0] not in arming]
        for step in arming:
            self._arm(step, hit)
        with self._lock:
            due = [
                step
                for step in self._pending
                if step.point == hit.point and step.occurrence == hit.occurrence
            ]
            for step in due:
                self._pending.remove(step)
        for step in due:
            self._apply(step, hit)
        # last: a fault may have asked to hold this very hit (dup_owner's twin)
        self._parts.holds.run(hit)

    def strike(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        """Carry out `step` at `hit` now, whatever the plan: a soak's storm strikes a worker
        it chose at a moment it chose (harness/campaigns/soak.py). Healed as any step."""
        self._apply(step, hit)

    def close(self) -> None:
        """Heal everything still broken, now: the next trial must find a whole world."""
        with self._lock:
            self._closed = True
            heals, self._heals = self._heals, []
        for timer, heal, _ in heals:
            timer.cancel()
            heal()

    def _apply(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        kind = kinds.KINDS[step.action]
        workers = self._parts.launcher.workers
        worker = workers.by_pid(hit.pid) or workers.by_id(hit.worker_id)
        strike = strike_module.Strike(step=step, hit=hit, worker=worker, parts=self._parts)
        if worker is None and step.action not in spec.SHARED:
            strike.record(step.action, ok=False, note="no worker of ours reported it")
            return
        stops = step.action in spec.STOPS_POSTGRES
        try:
            heal = kind.apply(strike)
        except (strike_module.NotApplied, errors.CrashcertError) as error:
            strike.record(step.action, ok=False, note=str(error))
            if stops:
                self._stop_settled(unhealed=0)
            return
        if stops:
            if heal is None:
                self._stays_down = True
            else:
                heal = self._counted(heal)
        if heal is not None:
            heal_at = boundaries.parse_ref(str(step.params.get("heal_at", "")))
            deadline = HEAL_AT_DEADLINE_LEASES if heal_at else DEFAULT_HEAL_LEASES
            heal_after = kind.heal_delay(strike)
            if heal_after is None:
                heal_after = float(step.params.get("heal_after_s", deadline * self._parts.lease_s))
            self._schedule(heal_after, heal, f"heal {step.action}", at=heal_at)

    def _counted(self, heal: Heal) -> Heal:
        """`heal` of a Postgres stop, which tells postgres_back when it was the last."""
        with self._lock:
            self._stops_unhealed += 1

        def healed() -> None:
            heal()  # a heal that raised leaves Postgres down: the trial stays alone
            self._stop_settled(unhealed=-1)

        return healed

    def _stop_settled(self, *, unhealed: int) -> None:
        with self._lock:
            self._stops_unhealed += unhealed
            back = (
                self._postgres_back is not None
                and not self._stays_down
                and self._stops_unhealed == 0
                and not any(step.action in spec.STOPS_POSTGRES for step in self._pending)
            )
        if back:
            assert self._postgres_back is not None
            self._postgres_back()

    def _arm(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        """The kind's preparation; a failed one is left to its `apply` to report."""
        strike = strike_module.Strike(step=step, hit=hit, worker=None, parts=self._parts)
        try:
            kinds.KINDS[step.action].arm(strike)  # type: ignore[attr-defined]
        except (strike_module.NotApplied, errors.CrashcertError) as error:
            log.warning("could not prepare %s at %s: %s", step.label(), hit.point, error)

    def _schedule(
        self, delay_s: float, heal: Heal, name: str, *, at: tuple[str, int] | None = None
    ) -> None:
        """Heal after `delay_s`, or earlier when a worker reports `at`; only once."""
        first = threading.Lock()  # the timer and a worker's hit may race to heal
        done = threading.Event()

        def once() -> None:
            if not first.acquire(blocking=False):
                # Another thread heals right now: return only once it has, so close()
                # hands over a healed world (the proxy audit then sees no half-done heal).
                done.wait(HEAL_WAIT_S)
                return
            try:
                heal()
            except Exception:  # a failed heal must not kill the timer thread silently
                log.exception("heal %s failed", name)
            finally:
                done.set()

        timer = threading.Timer(delay_s, once)
        timer.daemon = True
        with self._lock:
            if self._closed:
                once()
                return
            self._heals.append((timer, once, name))
            if at is not None:
                self._heal_at.append((at, once))
        timer.start()
