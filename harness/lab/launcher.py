"""Starts engine workers for one trial with the environment of the engine contract."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from harness import errors
from harness.engines import adapter
from harness.lab import containment, processes, spawner
from harness.record import history
from harness.record import recorder as recorder_module

# Given a worker id, the DSN that worker should use (through its own Toxiproxy proxy).
DsnForWorker = Callable[[str], str]


class Launcher:
    def __init__(
        self,
        engine: adapter.EngineAdapter,
        *,
        world_env: Mapping[str, str],
        control_path: str | None,
        dsn_for_worker: DsnForWorker,
        log_dir: pathlib.Path,
        recorder: recorder_module.Recorder,
        trial_id: str,
        forkserver: spawner.ForkServer | None = None,
        world_links: Any | None = None,  # world_links.WorldLinks: the plan cuts a link
        clocks: Any | None = None,  # faketime.Clocks: the plan skews a clock
        store_links: Any | None = None,  # store_links.StoreLinks: the engine's own store
    ) -> None:
        self._engine = engine
        self._world_env = dict(world_env)
        self._control_path = control_path
        self._dsn_for_worker = dsn_for_worker
        self._log_dir = log_dir
        self._recorder = recorder
        self._trial_id = trial_id
        # A preload must be in place when the interpreter starts: a fork of the warm
        # server would run without it, so skewable workers are started with exec.
        self._forkserver = None if clocks is not None else forkserver
        self._world_links = world_links
        self._clocks = clocks
        self._store_links = store_links
        self._count = 0
        self._lock = threading.Lock()
        self.workers = processes.WorkerSet()
        # Held across a start, so close() stops a worker started (by a late fault strike)
        # while the trial was closing, and no start begins after it.
        self._starting = threading.Lock()
        self._closed = False
        # Holds what the workers start, made at the first start (harness/lab/containment.py).
        self.containment: containment.Containment | None = None
        # Each worker id's DSN (its own proxy), reused when a worker restarts under its id.
        self._dsns: dict[str, str] = {}
        # Each worker id's world variables as given (its own proxies when links are cut).
        self._world: dict[str, dict[str, str]] = {}
        # Set by upgrade(): every worker started since runs the engine's next version.
        self.upgraded = False

    def _next_id(self) -> str:
        with self._lock:
            self._count += 1
            return f"{self._trial_id}-w{self._count}"

    def environment(self, worker_id: str) -> dict[str, str]:
        env = adapter.inherited_environment()
        env.update(self._next_env() if self.upgraded else self._engine.worker_env())
        if worker_id not in self._world:
            world = dict(self._world_env)
            if self._world_links is not None:
                world.update(self._world_links.env_for(worker_id))
            if self._store_links is not None:
                world.update(self._store_links.env_for(worker_id))
            self._world[worker_id] = world
        env.update(self._world[worker_id])
        if self._clocks is not None:
            env.update(self._clocks.env_for(worker_id))
        if worker_id not in self._dsns:
            self._dsns[worker_id] = self._dsn_for_worker(worker_id)
        env["DATABASE_URL"] = self._dsns[worker_id]
        env["CRASHCERT_WORKER_ID"] = worker_id
        env["CRASHCERT_LEASE_MS"] = str(self._engine.lease_ms)
        env["PYTHONUNBUFFERED"] = "1"
        if self._control_path:
            env["CRASHCERT_CONTROL"] = self._control_path
        return env

    def world_url(self, worker_id: str, variable: str) -> str | None:
        """The URL a worker was given for a world service (`CRASHCERT_TOOLS_URL`...): the
        service's own, or the worker's proxy in front of it."""
        return self._world.get(worker_id, self._world_env).get(variable)

    def start(self, *, worker_id: str | None = None) -> processes.Worker:
        """A new worker process; `worker_id` reuses an id (a restart under the same id)."""
        with self._starting:
            if self._closed:
                raise errors.CrashcertError("the trial's workers are stopped: no new worker")
            return self._start(worker_id or self._next_id())

    def refill(self) -> processes.Worker | None:
        """A fresh worker when none is alive, as a supervisor brings one; none once the trial
        is closing (a fault's heal that runs at teardown, a term's grace, starts nothing)."""
        with self._starting:
            if self._closed or self.workers.alive():
                return None
            return self._start(self._next_id())

    def _start(self, worker_id: str) -> processes.Worker:
        worker = processes.Worker(
            worker_id,
            self._command(),
            env=self.environment(worker_id),
            log_dir=self._log_dir,
            cwd=self._engine.cwd,
            forkserver=self._forkserver,
            containment=self.contain(),
        )
        self.workers.add(worker)
        self._recorder.append(
            history.WorkerEvent(event="started", worker_id=worker_id, pid=worker.pid)
        )
        return worker

    def contain(self) -> containment.Containment:
        """The trial's containment, made when its first process starts."""
        with self._lock:
            if self.containment is None:
                # Every process the trial starts has an id starting with the trial's
                # (_next_id; a purge's `<trial>-purgeN`): the sweep's mark.
                self.containment = containment.Containment(
                    self._trial_id, worker_prefix=f"{self._trial_id}-"
                )
            return self.containment

    def describe_containment(self) -> str | None:
        """For the trial's record: what held the workers' processes (None: none started)."""
        return None if self.containment is None else self.containment.describe()

    def can_upgrade(self) -> bool:
        """Whether the engine names a next version (its description's `upgrade`)."""
        return self._next_command() is not None

    def upgrade(self, dsn: str | None) -> str:
        """From now on every worker started runs the engine's next version; its migration
        (if any) runs first, on `dsn`. What was done, in one line. Raises CrashcertError
        when the engine names no next version or its migration fails."""
        if self._next_command() is None:
            raise errors.CrashcertError(
                "the engine names no next version (`upgrade:` in its description)"
            )
        with self._starting:  # no worker of either version starts half-way through
            if self.upgraded:
                return "already at the next version"
            migrate = getattr(self._engine, "upgrade_migrate", None)
            migrated = bool(migrate(dsn)) if migrate is not None and dsn else False
            self.upgraded = True
        return "next version's migration ran" if migrated else "no migration to apply"

    def _next_command(self) -> list[str] | None:
        command = getattr(self._engine, "upgrade_worker_command", None)
        return None if command is None else command()

    def _next_env(self) -> Mapping[str, str]:
        env = getattr(self._engine, "upgrade_worker_env", None)
        return self._engine.worker_env() if env is None else env()

    def _command(self) -> list[str]:
        upgraded = self._next_command() if self.upgraded else None
        return upgraded or self._engine.worker_command()

    def close(self) -> None:
        with self._starting:
            self._closed = True
        try:
            self.workers.close()
        finally:
            # After the workers' own stop (SIGTERM, grace, SIGKILL): only what they left.
            if self.containment is not None:
                self.containment.close()
        for worker in self.workers.all():
            self._recorder.append(
                history.WorkerEvent(
                    event="exited",
                    worker_id=worker.worker_id,
                    pid=worker.pid,
                    returncode=worker.returncode,
                )
            )
