"""The adapter protocol every engine is driven through (command-based or in-process)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from harness.contract import run_report

# The harness's own settings (CRASHCERT_PG_DSN may carry a password) and the addresses it
# sets itself: an engine process inherits none of them from the harness's environment.
HARNESS_PREFIX = "CRASHCERT_"
SET_BY_HARNESS = frozenset({"DATABASE_URL", "OPENAI_BASE_URL"})


def inherited_environment() -> dict[str, str]:
    """The harness's environment less what is the harness's own."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(HARNESS_PREFIX) and name not in SET_BY_HARNESS
    }


class EngineAdapter(Protocol):
    name: str
    # Points (boundary names, with :before_commit twins) the engine reports; empty = black box.
    boundaries: tuple[str, ...]
    lease_ms: int
    # Modules to import once in a warm fork server (Python engines only); () = exec workers.
    preload: tuple[str, ...]

    def migrate(self, dsn: str) -> None:
        """Create the engine's schema in an empty database."""

    def worker_command(self) -> list[str]:
        """argv of one worker process; the harness adds the environment of CONTRACT.md."""

    def worker_env(self) -> Mapping[str, str]:
        """Extra environment the engine wants for its workers."""

    def submit(self, dsn: str, run_input: run_report.RunInput) -> str:
        """Submit a run and return its id."""

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        """The run's current report."""

    def export(self, dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """Engine-specific durable state for checkers, or None."""

    @property
    def cwd(self) -> str | None:
        """Working directory for the engine's commands."""
