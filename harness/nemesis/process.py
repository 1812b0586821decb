"""Faults on a worker's processes: SIGKILL, SIGTERM with a grace (a deploy), and SIGSTOP
past the lease."""

from __future__ import annotations

from typing import Any

from harness import errors
from harness.contract import boundaries
from harness.nemesis import strike as strike_module
from harness.record import history

PAUSE_MAX_LEASES = 20
# term without grace_ms: two seconds, as long as many short-lived deploys allow.
DEFAULT_GRACE_MS = 2000
# dup_owner: how long the held worker waits for its twin's first move, and the twin for it.
TWIN_WAIT_LEASES = 2
# Hits after which a stale worker's lease is certainly gone: the adopter moved the run on.
ADOPTER_PROGRESS = frozenset(
    point
    for point in boundaries.BOUNDARIES
    if point not in {"run.claimed", "model.returned", "tool.returned", "reply.sent"}
)


class Kill(strike_module.Kind):
    """SIGKILL the process group; a standby (or a fresh worker) recovers."""

    def apply(self, strike: strike_module.Strike) -> None:
        worker, launcher = strike.worker, strike.parts.launcher
        worker.kill()
        strike.record("kill", ok=True, note=f"SIGKILL process group {worker.pgid}")
        if strike.step.params.get("same_worker_id"):
            _restart_same_id(strike)
        _refill(launcher)


def _refill(launcher: Any) -> None:
    """A pool a kill left empty gets a fresh worker, as a supervisor (or a deploy) brings."""
    launcher.refill()


def _restart_same_id(strike: strike_module.Strike) -> None:
    """A supervisor that restarts the killed process under the same worker id."""
    try:
        again = strike.parts.launcher.start(worker_id=strike.worker.worker_id)
    except errors.CrashcertError as error:
        strike.record("restart", ok=False, note=f"restart failed: {error}")
        return
    strike.record("restart", ok=True, note=f"restarted as pid {again.pid} with the same worker id")


class Term(strike_module.Kind):
    """SIGTERM the process group, as a rolling deploy stops a worker: the engine may finish
    or hand back its run within `grace_ms`; a worker still alive then is SIGKILLed. A run
    the stopped worker gave back is taken by the standby, or by the worker the harness starts
    once this one has exited (a supervisor's replacement)."""

    def heal_delay(self, strike: strike_module.Strike) -> float:
        return float(strike.step.params.get("grace_ms", DEFAULT_GRACE_MS)) / 1000.0

    def apply(self, strike: strike_module.Strike) -> strike_module.Heal:
        worker, launcher = strike.worker, strike.parts.launcher
        grace_ms = int(self.heal_delay(strike) * 1000)
        worker.request_stop()
        strike.record(
            "term", ok=True, note=f"SIGTERM process group {worker.pgid}, grace {grace_ms} ms"
        )

        def grace_over() -> None:
            if worker.alive:
                worker.kill()
                note = (
                    f"still alive {grace_ms} ms after SIGTERM: SIGKILL process group {worker.pgid}"
                )
                _refill(launcher)
            else:
                note = f"exited with status {worker.returncode} within {grace_ms} ms of SIGTERM"
            strike.record("grace_over", ok=True, note=note)

        return grace_over


class DupOwner(strike_module.Kind):
    """A second live process under the held worker's id, as a deployment makes one: a
    duplicate pod (a StatefulSet split brain) or a supervisor that restarted a worker it
    wrongly took for dead; both live on. Whatever the twin then finds to do (an engine
    that recovers "its own" runs at start-up finds this one, a redelivered claim, a stale
    list), a worker id names a deployment slot, not a process: fencing must tell them apart.

    The schedule is fixed, so a trial does not hang on which owner moves first: the held
    worker waits for the twin's first move on the run past its claim (a hit that is no
    `run.claimed` and no `:before_commit`), and the twin is held at that hit until the held
    worker reported its next one. So both act on the state the run had at the point, the
    twin first. A twin that never moves on the run (a fenced engine) releases the held
    worker after TWIN_WAIT_LEASES."""

    def apply(self, strike: strike_module.Strike) -> None:
        worker, parts, hit = strike.worker, strike.parts, strike.hit
        limit = TWIN_WAIT_LEASES * parts.lease_s

        def twin_moved(other: history.BoundaryHit) -> bool:
            return (
                other.worker_id == worker.worker_id
                and other.pid != worker.pid
                and other.run_id == hit.run_id
                and other.point != "run.claimed"
                and not other.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
            )

        def hold_twin(moved: history.BoundaryHit) -> None:
            # runs on the twin's control thread: it stays at `moved` until the held one acted
            parts.recorder.wait_for(
                lambda other: other.pid == worker.pid and other.seq > moved.seq, timeout=limit
            )

        # registered before the twin exists: its first move cannot slip past
        drop = parts.holds.add(twin_moved, hold_twin)
        try:
            twin = parts.launcher.start(worker_id=worker.worker_id)
        except errors.CrashcertError as error:
            drop()
            raise strike_module.NotApplied(f"second worker failed to start: {error}") from error
        moved = parts.recorder.wait_for(twin_moved, timeout=limit)
        if moved is None:
            drop()  # a later move (a legitimate takeover) is not held
        seen = (
            f"it moved first ({moved.point}, held there until {worker.pid} reports again)"
            if moved
            else f"it did not move on the run within {TWIN_WAIT_LEASES} leases"
        )
        note = f"second worker pid {twin.pid} as {worker.worker_id}: {seen}; {worker.pid} lives on"
        strike.record("dup_owner", ok=True, note=note)


class Pause(strike_module.Kind):
    """SIGSTOP past the lease until another worker adopts the run; then SIGCONT (a zombie)."""

    def apply(self, strike: strike_module.Strike) -> None:
        worker, hit, parts = strike.worker, strike.hit, strike.parts
        worker.pause()
        strike.record("pause", ok=True, note=f"SIGSTOP process group {worker.pgid}")
        if not [other for other in parts.launcher.workers.alive() if not other.paused]:
            # Nobody left to adopt the run: a pool would have another worker, so start one.
            parts.launcher.start()
        limit = float(strike.step.params.get("resume_after_s", PAUSE_MAX_LEASES * parts.lease_s))

        def adopter_moved_on(other: history.BoundaryHit) -> bool:
            return (
                other.seq > hit.seq
                and other.worker_id != hit.worker_id
                and boundaries.base_name(other.point) in ADOPTER_PROGRESS
                and not other.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
            )

        adopted = parts.recorder.wait_for(adopter_moved_on, timeout=limit)
        worker.resume()
        note = (
            f"SIGCONT after {adopted.worker_id} reached {adopted.point}"
            if adopted
            else f"SIGCONT after {limit:.1f}s without adoption"
        )
        strike.record("resume", ok=True, note=note)
