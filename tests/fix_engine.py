"""Reference-engine fixtures: a migrated template database cloned per test, and a small
driver that runs the engine's CLI and workers as real subprocesses."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import typing
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from harness.engines import adapter
from harness.lab import postgres, shared, spawner
from harness.lab.postgres import templates
from harness.scenario import schema
from harness.world import world as world_module
from reference_engine import connection, migrations, sqlfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOP_TIMEOUT_S = 10


def lab_of(engine: adapter.EngineAdapter, forkserver: spawner.ForkServer) -> shared.Lab:
    """A Lab of an engine and its fork server alone (no Postgres, Toxiproxy or template):
    enough for what `Lab.with_engine` decides."""
    return shared.Lab(
        pg=None,  # type: ignore[arg-type]
        engine=engine,
        template="unused",
        toxiproxy=None,
        toxiproxy_note="",
        forkserver=forkserver,
    )


def template_name() -> str:
    """Changes whenever a migration changes, so a stale template is never reused."""
    digest = hashlib.sha256()
    for migration in sqlfile.migrations():
        digest.update(migration.sql.encode())
    return f"crashcert_engine_{digest.hexdigest()[:12]}"


@pytest.fixture(scope="session")
def engine_template(pg_server: postgres.Server) -> str:
    def migrate(dsn: str) -> None:
        db = connection.Connector(dsn)
        try:
            migrations.migrate(db)
        finally:
            db.close()

    name = template_name()
    templates.ensure_template(pg_server, name, migrate)
    return name


@pytest.fixture
def engine_db(pg_server: postgres.Server, engine_template: str) -> Iterator[str]:
    """DSN of a fresh database with the engine's schema, dropped after the test."""
    if not pg_server.is_running():
        pg_server.start()
    name = f"crashcert_engine_test_{uuid.uuid4().hex[:12]}"
    dsn = templates.clone(pg_server, engine_template, name)
    yield dsn
    if not pg_server.is_running():
        pg_server.start()
    templates.drop(pg_server, name)


class Engine:
    """Runs `python -m reference_engine ...` against one database."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.workers: list[subprocess.Popen[bytes]] = []
        self._connectors: list[connection.Connector] = []

    def env(self, world: world_module.World | None = None, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CRASHCERT_")}
        env["DATABASE_URL"] = self.dsn
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("CRASHCERT_LEASE_MS", "1000")
        env["CRASHCERT_POLL_MS"] = "20"
        env["CRASHCERT_BACKOFF_MS"] = "20"
        env["CRASHCERT_MAX_BACKOFF_MS"] = "200"
        if world is not None:
            env.update(world.env())
        env.update(extra)
        return env

    def cli(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        result = subprocess.run(
            [sys.executable, "-m", "reference_engine", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
            cwd=REPO,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"reference_engine {args} failed: {result.stderr}")
        return json.loads(result.stdout) if result.stdout.strip() else result

    def submit(self, run_input: Mapping[str, Any]) -> str:
        return str(self.cli("submit", "--input", "-", stdin=json.dumps(run_input))["run_id"])

    def status(self, run_id: str) -> dict[str, Any]:
        return typing.cast(dict[str, Any], self.cli("status", run_id))

    def export(self, run_id: str) -> dict[str, Any]:
        return typing.cast(dict[str, Any], self.cli("export", run_id))

    def start_worker(
        self,
        world: world_module.World | None = None,
        *,
        worker_id: str | None = None,
        **extra: str,
    ) -> subprocess.Popen[bytes]:
        env = self.env(world, CRASHCERT_WORKER_ID=worker_id or f"w-{uuid.uuid4().hex[:8]}", **extra)
        process = subprocess.Popen(
            [sys.executable, "-m", "reference_engine", "worker"],
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        self.workers.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        with _suppress_lookup():
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)

    def connector(self) -> connection.Connector:
        """The engine's own database layer, for driving it from a test; closed with us."""
        db = connection.Connector(self.dsn)
        self._connectors.append(db)
        return db

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                with _suppress_lookup():
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.workers:
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill(process)
        for db in self._connectors:
            db.close()


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        return isinstance(exc, ProcessLookupError)


@pytest.fixture
def engine(engine_db: str) -> Iterator[Engine]:
    driver = Engine(engine_db)
    yield driver
    driver.close()


def run_input(
    world: world_module.World,
    *,
    run_key: str | None = None,
    max_attempts: int = 5,
    budgets: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The RunInput for the world's scenario, with the run marker embedded."""
    scenario = world.scenario
    run_key = run_key or f"r-{uuid.uuid4().hex[:10]}"
    marker = world.register_run(run_key)
    user = schema.substitute_run_key(scenario.input.user, run_key)
    return {
        "run_key": run_key,
        "messages": [
            {"role": "system", "content": scenario.input.system},
            {"role": "user", "content": f"{marker} {user}"},
        ],
        "budgets": dict(budgets or scenario.budgets.model_dump()),
        "max_attempts": max_attempts,
    }
