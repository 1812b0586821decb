"""An engine run as a black box: the same engine, no control channel (CONTRACT.md section 6).

Faults then come from the world (harness/nemesis/world_trigger.py), and the checkers read
world hits as the boundaries they stand for (harness/checkers/blackbox.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.contract import boundaries, run_report
from harness.engines import adapter
from harness.faults import spec


class BlackBoxEngine:
    """An engine adapter seen as a black box: the same engine, no control channel."""

    def __init__(self, engine: adapter.EngineAdapter) -> None:
        self._engine = engine
        self.name = engine.name
        self.boundaries: tuple[str, ...] = ()
        # What the engine itself reports, for evidence that must not say it reports nothing.
        self.declared_boundaries: tuple[str, ...] = engine.boundaries
        self.lease_ms = engine.lease_ms
        self.preload = engine.preload
        self.description = getattr(engine, "description", None)

    def bind_store(self, dsn: str, env: Mapping[str, str] | None) -> None:
        binding = getattr(self._engine, "bind_store", None)
        if binding is not None:
            binding(dsn, env)

    @property
    def cwd(self) -> str | None:
        return self._engine.cwd

    def migrate(self, dsn: str) -> None:
        self._engine.migrate(dsn)

    def worker_command(self) -> list[str]:
        return self._engine.worker_command()

    def worker_env(self) -> Mapping[str, str]:
        return self._engine.worker_env()

    def upgrade_worker_command(self) -> list[str] | None:
        command = getattr(self._engine, "upgrade_worker_command", None)
        return None if command is None else command()

    def upgrade_worker_env(self) -> Mapping[str, str]:
        env = getattr(self._engine, "upgrade_worker_env", None)
        return self.worker_env() if env is None else env()

    def upgrade_migrate(self, dsn: str) -> bool:
        migrate = getattr(self._engine, "upgrade_migrate", None)
        return False if migrate is None else bool(migrate(dsn))

    def submit(self, dsn: str, run_input: run_report.RunInput) -> str:
        return self._engine.submit(dsn, run_input)

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        return self._engine.report(dsn, run_id)

    def export(self, dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]] | None:
        return self._engine.export(dsn, run_id)

    def done_with(self, dsn: str) -> None:
        done_with(self._engine, dsn)


def done_with(engine: Any, dsn: str) -> None:
    """Tell an engine adapter that has the hook (an in-process one keeps a connection)."""
    hook = getattr(engine, "done_with", None)
    if hook is not None:
        hook(dsn)


def declared_boundaries(engine: adapter.EngineAdapter) -> tuple[str, ...]:
    """The points the engine's description declares, also when it runs as a black box."""
    if isinstance(engine, BlackBoxEngine):
        return engine.declared_boundaries
    return engine.boundaries


def wanted(engine: adapter.EngineAdapter, plan: list[spec.FaultStep]) -> bool:
    """World triggers are installed for black-box engines and for plans with black-box points."""
    return not engine.boundaries or any(boundaries.is_blackbox_point(s.point) for s in plan)
