"""Faults: applied while a worker is held at a boundary. The nemesis decides no verdict.

The plan says *which* fault *where* (point and occurrence); the nemesis carries it out
from the control channel's thread, records what it did, and heals what it broke.
"""

from __future__ import annotations

import logging
import threading

from harness import history, launcher as launcher_module, recorder as recorder_module

log = logging.getLogger(__name__)


class Nemesis:
    def __init__(
        self,
        plan: list[history.FaultStep],
        *,
        launcher: launcher_module.Launcher,
        recorder: recorder_module.Recorder,
    ) -> None:
        self._pending = list(plan)
        self._applied: list[history.FaultStep] = []
        self._launcher = launcher
        self._recorder = recorder
        self._lock = threading.Lock()

    @property
    def unapplied(self) -> list[history.FaultStep]:
        with self._lock:
            return list(self._pending)

    def on_hit(self, hit: history.BoundaryHit) -> None:
        """Control-channel policy: runs while the reporting worker is blocked."""
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

    def _apply(self, step: history.FaultStep, hit: history.BoundaryHit) -> None:
        worker = self._launcher.workers.by_pid(hit.pid) or self._launcher.workers.by_id(
            hit.worker_id
        )
        if worker is None:
            self._record(step, hit, ok=False, note="no worker of ours reported this hit")
            return
        if step.action == "kill":
            worker.kill()
            self._record(step, hit, ok=True, note=f"SIGKILL process group {worker.pgid}")
            self._launcher.start()  # a fresh worker recovers the run
            return
        self._record(step, hit, ok=False, note=f"fault {step.action!r} is not supported yet")

    def _record(
        self, step: history.FaultStep, hit: history.BoundaryHit, *, ok: bool, note: str
    ) -> None:
        with self._lock:
            self._applied.append(step)
        self._recorder.append(
            history.FaultApplied(
                action=step.action,
                step=step.label(),
                worker_id=hit.worker_id,
                pid=hit.pid,
                ok=ok,
                note=note,
            )
        )
