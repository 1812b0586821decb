"""A scenario's after-finish actions: `purge` and `reuse_key` (the dbos-transact-py #769
class: a run key reused after an interrupted retention pass).

Once the run is terminal, in the scenario's order:

- `purge`: the engine's optional purge command deletes the finished run. It runs as a
  process with a worker's environment (control channel, its own Toxiproxy proxy), tracked
  by the launcher, so the plan's faults strike it at `run.purged[:before_commit]` like any
  worker. A purge that was killed or failed is run again, as a periodic retention job
  would, until it succeeds or the deadline passes.
- `reuse_key`: a new request (the scenario's input under another world key, so the world
  tells its conversation and reply from the purged run's) is submitted under the purged
  run's key, and the run it answers is let end. `run.single_submit` judges it.

An engine without a purge command leaves both not applied: INCONCLUSIVE, never FAIL.
"""

from __future__ import annotations

import logging
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from harness import errors
from harness.contract import run_report
from harness.lab import launcher as launcher_module
from harness.lab import processes
from harness.record import history, resubmit
from harness.record import recorder as recorder_module
from harness.scenario import schema

log = logging.getLogger(__name__)

T = TypeVar("T")

# The world key of the new request: the run key with this suffix.
REUSED_SUFFIX = "-reused"
# How long a retention job waits before it runs again after an interrupted pass, in leases.
RETRY_LEASES = 1.0


def wanted(scenario: schema.Scenario) -> list[schema.Action]:
    return [action for action in scenario.actions if action.do in schema.AFTER_FINISH]


class Retention:
    def __init__(
        self,
        engine: Any,
        dsn: str,
        trial: history.TrialHistory,
        *,
        launcher: launcher_module.Launcher,
        recorder: recorder_module.Recorder,
        server: Any,
        log_dir: pathlib.Path,
        build_input: Callable[[schema.Scenario, str], run_report.RunInput],
        deadline: float,
        poll_s: float,
    ) -> None:
        self._engine = engine
        self._dsn = dsn
        self._trial = trial
        self._launcher = launcher
        self._recorder = recorder
        self._server = server
        self._log_dir = log_dir
        self._build_input = build_input
        self._deadline = deadline
        self._poll_s = poll_s
        self.purged = False

    def run(self) -> None:
        """Every after-finish action in order; one not applied stops the rest."""
        pending = wanted(self._trial.scenario)
        while pending:
            action = pending.pop(0)
            done = self._purge(action) if action.do == "purge" else self._reuse_key(action)
            if not done:
                for rest in pending:
                    self._record(rest, 0, ok=False, note=f"{action.do} was never applied")
                return

    # -- purge --------------------------------------------------------------------------

    def _purge(self, action: schema.Action) -> bool:
        run_id = self._trial.run_id
        command = getattr(self._engine, "purge_command", None)
        argv = command(run_id) if command is not None and run_id is not None else None
        if argv is None:
            self._record(action, 0, ok=False, note="the engine has no purge command")
            return False
        notes: list[str] = []
        requested = self._recorder.tick()
        attempt = 0
        while time.monotonic() < self._deadline:
            attempt += 1
            worker = self._start(argv, f"{self._trial.trial_id}-purge{attempt}")
            exited = processes.wait_until(
                lambda process=worker: not process.alive,
                timeout=max(0.0, self._deadline - time.monotonic()),
            )
            worker.replaced = True  # a purge process is not replaced when it ends
            if exited and worker.returncode == 0:
                self.purged = True
                notes.append(f"purged by {worker.worker_id}")
                self._record(action, requested, ok=True, note="; ".join(notes))
                return True
            why = "killed" if worker.killed else f"exit {worker.returncode}"
            notes.append(f"{worker.worker_id} {why if exited else 'still running'}")
            if not exited:
                break
            # a retention job runs again a period later
            threading.Event().wait(RETRY_LEASES * self._engine.lease_ms / 1000.0)
        self._record(action, requested, ok=False, note="never completed: " + "; ".join(notes))
        return False

    def _start(self, argv: list[str], worker_id: str) -> processes.Worker:
        worker = processes.Worker(
            worker_id,
            argv,
            env=self._launcher.environment(worker_id),
            log_dir=self._log_dir,
            cwd=self._engine.cwd,
            containment=self._launcher.contain(),
        )
        self._launcher.workers.add(worker)  # the nemesis finds it by pid
        self._recorder.append(
            history.WorkerEvent(event="started", worker_id=worker_id, pid=worker.pid)
        )
        return worker

    # -- reuse_key ----------------------------------------------------------------------

    def _reuse_key(self, action: schema.Action) -> bool:
        trial = self._trial
        world_key = trial.run_key + REUSED_SUFFIX
        new_input = self._build_input(trial.scenario, world_key).model_copy(
            update={"run_key": trial.run_key}
        )
        requested = self._recorder.tick()
        try:
            # a submit that failed (Postgres down on purpose) is sent again: it is idempotent
            run_id = str(self.retrying(lambda: self._engine.submit(self._dsn, new_input)))
        except errors.CrashcertError as error:
            self._record(action, requested, ok=False, note=f"submit failed: {error}")
            return False
        self._record(action, requested, ok=True, run_id=run_id, world_key=world_key)
        if run_id != trial.run_id:  # the purged run has no report left to wait for
            resubmit.await_terminal(
                self._engine,
                self._dsn,
                [run_id],
                server=self._server,
                deadline=self._deadline,
                poll_s=self._poll_s,
            )
        return True

    def retrying(self, call: Callable[[], T]) -> T:
        """`call` until it succeeds, a lease apart, until the deadline (its last error)."""
        while True:
            try:
                return call()
            except errors.CrashcertError as error:
                if time.monotonic() >= self._deadline:
                    raise
                log.info("not yet (asking again): %s", error)
                threading.Event().wait(RETRY_LEASES * self._engine.lease_ms / 1000.0)

    def _record(
        self,
        action: schema.Action,
        requested: int,
        *,
        ok: bool,
        note: str = "",
        run_id: str | None = None,
        world_key: str | None = None,
    ) -> None:
        self._recorder.append(
            history.ActionTaken(
                do=action.do,
                at=action.at,
                requested_seq=requested,
                ok=ok,
                note=note,
                run_id=run_id,
                world_key=world_key,
            )
        )
