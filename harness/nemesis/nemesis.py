"""Faults: applied while a worker is held at a boundary. The nemesis decides no verdict.

The plan says which fault where (point and occurrence); the nemesis carries it out from the
control channel's thread while the reporting worker is blocked, records what it did, and
heals what it broke: after `params.heal_after_s`, when any worker reports `params.heal_at`
(a point, e.g. `tool.settled#1`; the deadline is then longer), or at the latest when the
trial ends.

- kill: SIGKILL the worker's process group; a standby (or a fresh) worker recovers.
- pause: SIGSTOP past the lease until another worker adopts the run; then SIGCONT (a zombie).
- db_cut: disable the worker's proxy (connections die, none open); heal: enable.
- commit_lost: swallow server->engine bytes (COMMIT lands, its ack never does);
  heal: cut the hung connections, remove the toxic.
- commit_dropped: swallow engine->server bytes (COMMIT never arrives); heal as above.
  For both, the heal record says what really became of the held transaction
  (`observed.transaction`: committed, aborted or unknown), read from Postgres by xid.
- latency: latency far beyond the lease on the worker's link; heal: remove the toxic.
- pg_restart: `pg_ctl stop -m immediate` under every connection; heal: start Postgres.
- tool_cut, model_cut, sink_cut: the worker's own proxy in front of that world service
  (harness/lab/world_links.py) is disabled (connections die, none open), slowed
  (`latency_ms`, a latency toxic) or poisoned (`reset_peer=true`, a reset_peer toxic: every
  connection is reset); heal: enable, or remove the toxic.
- clock_skew: the worker's wall clock jumps by `offset_s` (libfaketime reads its offset
  file, harness/lab/faketime.py) and stays off: nothing heals it.
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
from harness.record import history
from harness.record import recorder as recorder_module

log = logging.getLogger(__name__)

# Defaults, in leases: long enough for the lease to lapse and another worker to adopt.
DEFAULT_HEAL_LEASES = 2.5
# With `heal_at`, the deadline that heals anyway if the point never comes.
HEAL_AT_DEADLINE_LEASES = 10
PAUSE_MAX_LEASES = 20
# clock_skew without offset_s: an hour behind, far beyond any lease. A clock behind makes
# a lease judged by it look live long after the database let it lapse.
DEFAULT_CLOCK_SKEW_S = -3600
# How long close() waits for a heal another thread is running (Toxiproxy calls, pg start).
HEAL_WAIT_S = 60.0
# Hits after which a stale worker's lease is certainly gone: the adopter moved the run on.
ADOPTER_PROGRESS = frozenset(
    point
    for point in boundaries.BOUNDARIES
    if point not in {"run.claimed", "model.returned", "tool.returned", "reply.sent"}
)

Heal = Callable[[], None]


class Nemesis:
    def __init__(
        self,
        plan: list[spec.FaultStep],
        *,
        launcher: launcher_module.Launcher,
        recorder: recorder_module.Recorder,
        proxies: Any,  # trial._Proxies: proxy per worker, or none without Toxiproxy
        pg: postgres.Server,
        lease_s: float,
        dsn: str | None = None,  # the trial's database, read past every proxy
        world_links: Any | None = None,  # harness.lab.world_links.WorldLinks
        clocks: Any | None = None,  # harness.lab.faketime.Clocks
    ) -> None:
        # A lost response or a cut stream is the world's doing (world_trigger), not ours.
        self._pending = [step for step in plan if step.action not in spec.IN_WORLD]
        self._launcher = launcher
        self._recorder = recorder
        self._proxies = proxies
        self._pg = pg
        self._lease_s = lease_s
        self._dsn = dsn
        self._world_links = world_links
        self._clocks = clocks
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
            due = [
                step
                for step in self._pending
                if step.point == hit.point and step.occurrence == hit.occurrence
            ]
            for step in due:
                self._pending.remove(step)
        for step in due:
            try:
                self._apply(step, hit)
            except errors.CrashcertError as error:
                self._record(step.action, step, hit, ok=False, note=str(error))

    def close(self) -> None:
        """Heal everything still broken, now: the next trial must find a whole world."""
        with self._lock:
            self._closed = True
            heals, self._heals = self._heals, []
        for timer, heal, _ in heals:
            timer.cancel()
            heal()

    # -- the faults ---------------------------------------------------------------------

    def _apply(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        worker = self._launcher.workers.by_pid(hit.pid) or self._launcher.workers.by_id(
            hit.worker_id
        )
        if worker is None and step.action != "pg_restart":
            self._record(step.action, step, hit, ok=False, note="no worker of ours reported it")
            return
        heal_at = boundaries.parse_ref(str(step.params.get("heal_at", "")))
        deadline = HEAL_AT_DEADLINE_LEASES if heal_at else DEFAULT_HEAL_LEASES
        heal_after = float(step.params.get("heal_after_s", deadline * self._lease_s))
        if step.action == "kill":
            assert worker is not None
            worker.kill()
            self._record("kill", step, hit, ok=True, note=f"SIGKILL process group {worker.pgid}")
            if step.params.get("same_worker_id"):
                self._restart_same_id(step, hit, worker)
            if not self._launcher.workers.alive():
                self._launcher.start()  # the pool is empty: a fresh worker, as a supervisor would
        elif step.action == "pause":
            assert worker is not None
            self._pause(step, hit, worker)
        elif step.action == "pg_restart":
            self._pg.stop_immediate()
            self._record("pg_restart", step, hit, ok=True, note="pg_ctl stop -m immediate")
            self._schedule(heal_after, self._pg_start(step, hit), "pg_start", at=heal_at)
        elif step.action in spec.SKEWS_CLOCK:
            self._skew(step, hit)
        else:
            proxy = self._proxy(hit, step.action)
            if proxy is None:
                self._record(step.action, step, hit, ok=False, note="no Toxiproxy proxy")
                return
            # The held worker's open transaction, noted before its COMMIT can be sent.
            xids = self._in_flight() if step.action in spec.COMMIT else []
            heal = self._break_link(step, proxy)
            observed = {"xids": xids} if step.action in spec.COMMIT else {}
            self._record(
                step.action, step, hit, ok=True, note=f"proxy {proxy.name}", observed=observed
            )
            self._schedule(heal_after, self._healer(step, hit, heal, xids), "heal", at=heal_at)

    def _skew(self, step: spec.FaultStep, hit: history.BoundaryHit) -> None:
        offset = float(step.params.get("offset_s", DEFAULT_CLOCK_SKEW_S))
        if self._clocks is None or not self._clocks.skew(hit.worker_id, offset):
            self._record(step.action, step, hit, ok=False, note="no skewable clock (libfaketime)")
            return
        note = f"wall clock of {hit.worker_id} shifted by {offset:+g}s (monotonic untouched)"
        self._record(step.action, step, hit, ok=True, note=note)

    def _restart_same_id(self, step: spec.FaultStep, hit: history.BoundaryHit, worker: Any) -> None:
        """A supervisor that restarts the killed process under the same worker id."""
        try:
            again = self._launcher.start(worker_id=worker.worker_id)
        except errors.CrashcertError as error:
            self._record("restart", step, hit, ok=False, note=f"restart failed: {error}")
            return
        note = f"restarted as pid {again.pid} with the same worker id"
        self._record("restart", step, hit, ok=True, note=note)

    def _pause(self, step: spec.FaultStep, hit: history.BoundaryHit, worker: Any) -> None:
        worker.pause()
        self._record("pause", step, hit, ok=True, note=f"SIGSTOP process group {worker.pgid}")
        if not [other for other in self._launcher.workers.alive() if not other.paused]:
            # Nobody left to adopt the run: a pool would have another worker, so start one.
            self._launcher.start()
        limit = float(step.params.get("resume_after_s", PAUSE_MAX_LEASES * self._lease_s))

        def adopter_moved_on(other: history.BoundaryHit) -> bool:
            return (
                other.seq > hit.seq
                and other.worker_id != hit.worker_id
                and boundaries.base_name(other.point) in ADOPTER_PROGRESS
                and not other.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
            )

        adopted = self._recorder.wait_for(adopter_moved_on, timeout=limit)
        worker.resume()
        note = (
            f"SIGCONT after {adopted.worker_id} reached {adopted.point}"
            if adopted
            else f"SIGCONT after {limit:.1f}s without adoption"
        )
        self._record("resume", step, hit, ok=True, note=note)

    def _break_link(self, step: spec.FaultStep, proxy: Any) -> Heal:
        if step.action == "db_cut":
            proxy.disable()
            return proxy.enable
        if step.action in spec.COMMIT:
            stream = "downstream" if step.action == "commit_lost" else "upstream"
            # timeout=0: bytes are swallowed and the connection stays open until healed.
            toxic = proxy.add_toxic("timeout", stream=stream, attributes={"timeout": 0})

            def heal() -> None:
                proxy.disable()  # the engine's hung connection finally errors out
                proxy.remove_toxic(toxic)
                proxy.enable()

            return heal
        if step.action == "latency":
            latency_ms = int(step.params.get("latency_ms", 3 * self._lease_s * 1000))
            toxic = proxy.add_toxic(
                "latency", stream="downstream", attributes={"latency": latency_ms}
            )
            return lambda: proxy.remove_toxic(toxic)
        if step.action in spec.LINKS:
            return self._break_world_link(step, proxy)
        raise errors.CrashcertError(f"unknown fault action {step.action!r}")

    def _break_world_link(self, step: spec.FaultStep, proxy: Any) -> Heal:
        """Cut by default; slowed with `latency_ms`; every connection reset with reset_peer."""
        if step.params.get("reset_peer"):
            # timeout=0: each connection is reset at once, in both directions' stead.
            toxic = proxy.add_toxic("reset_peer", stream="upstream", attributes={"timeout": 0})
            return lambda: proxy.remove_toxic(toxic)
        if "latency_ms" in step.params:
            toxic = proxy.add_toxic(
                "latency", stream="downstream", attributes={"latency": step.params["latency_ms"]}
            )
            return lambda: proxy.remove_toxic(toxic)
        proxy.disable()
        return proxy.enable

    # -- bookkeeping --------------------------------------------------------------------

    def _proxy(self, hit: history.BoundaryHit, action: str) -> Any | None:
        service = spec.LINKS.get(action)
        if service is not None:  # the worker's link to a world service
            if self._world_links is None:
                return None
            return self._world_links.proxy(hit.worker_id, service)
        if self._proxies is None:
            return None
        return self._proxies.by_worker.get(hit.worker_id or "")

    def _pg_start(self, step: spec.FaultStep, hit: history.BoundaryHit) -> Heal:
        def heal() -> None:
            self._pg.start()
            self._record("pg_start", step, hit, ok=True, note="Postgres accepts connections")

        return heal

    def _healer(
        self,
        step: spec.FaultStep,
        hit: history.BoundaryHit,
        heal: Heal,
        xids: list[int],
    ) -> Heal:
        def run() -> None:
            heal()
            note = f"healed {step.action}"
            observed: dict[str, Any] = {}
            if step.action in spec.COMMIT:
                # The heal cut the hung connection, so its transaction settles now:
                # committed or rolled back, never both, whatever the engine concludes.
                outcome, why = self._fate(xids)
                observed = {"transaction": outcome, "xids": xids}
                note += f"; the held transaction {outcome.upper()} ({why})"
            self._record("heal", step, hit, ok=True, note=note, observed=observed)

        return run

    def _in_flight(self) -> list[int]:
        if self._dsn is None:
            return []
        try:
            return postgres.xact.in_flight(self._dsn)
        except errors.CrashcertError as error:
            log.warning("%s", error)
            return []

    def _fate(self, xids: list[int]) -> tuple[str, str]:
        if self._dsn is None:
            return postgres.xact.UNKNOWN, "no database to ask"
        return postgres.xact.fate(self._dsn, xids)

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

    def _record(
        self,
        action: str,
        step: spec.FaultStep,
        hit: history.BoundaryHit,
        *,
        ok: bool,
        note: str,
        observed: dict[str, Any] | None = None,
    ) -> None:
        self._recorder.append(
            history.FaultApplied(
                action=action,
                planned=step,
                struck_at=spec.PointRef(point=hit.point, occurrence=hit.occurrence),
                worker_id=hit.worker_id,
                pid=hit.pid,
                ok=ok,
                note=note,
                observed=observed or {},
            )
        )
