"""Faults on a worker's processes: SIGKILL, and SIGSTOP past the lease."""

from __future__ import annotations

from harness import errors
from harness.contract import boundaries
from harness.nemesis import strike as strike_module
from harness.record import history

PAUSE_MAX_LEASES = 20
# Hits after which a stale worker's lease is certainly gone: the adopter moved the run on.
ADOPTER_PROGRESS = frozenset(
    point
    for point in boundaries.BOUNDARIES
    if point not in {"run.claimed", "model.returned", "tool.returned", "reply.sent"}
)


class Kill:
    """SIGKILL the process group; a standby (or a fresh worker) recovers."""

    needs_worker = True

    def apply(self, strike: strike_module.Strike) -> None:
        worker, launcher = strike.worker, strike.parts.launcher
        worker.kill()
        strike.record("kill", ok=True, note=f"SIGKILL process group {worker.pgid}")
        if strike.step.params.get("same_worker_id"):
            _restart_same_id(strike)
        if not launcher.workers.alive():
            launcher.start()  # the pool is empty: a fresh worker, as a supervisor would


def _restart_same_id(strike: strike_module.Strike) -> None:
    """A supervisor that restarts the killed process under the same worker id."""
    try:
        again = strike.parts.launcher.start(worker_id=strike.worker.worker_id)
    except errors.CrashcertError as error:
        strike.record("restart", ok=False, note=f"restart failed: {error}")
        return
    strike.record("restart", ok=True, note=f"restarted as pid {again.pid} with the same worker id")


class Pause:
    """SIGSTOP past the lease until another worker adopts the run; then SIGCONT (a zombie)."""

    needs_worker = True

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
