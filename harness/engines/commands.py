"""An engine described by commands in a YAML file (harness/CONTRACT.md, section 5).

Placeholders in commands: `{python}` (this interpreter), `{run_id}`. Every command gets
`DATABASE_URL`; `submit` reads the RunInput JSON on stdin and prints `{"run_id": ...}`;
`status` prints a RunReport; `export` (optional) prints engine tables as JSON;
`approve`/`reject` (optional, `{run_id}` `{tool_call_id}`) decide a tool call awaiting
approval, `cancel` (optional, `{run_id}`) cancels a run, `purge` (optional, `{run_id}`)
deletes a finished run.
"""

from __future__ import annotations

import importlib
import importlib.resources
import json
import pathlib
import subprocess
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import pydantic

from harness import errors
from harness.contract import boundaries as boundaries_module
from harness.contract import run_report
from harness.engines import adapter, placeholders, status_server, store
from harness.engines import capabilities as capabilities_module
from harness.inputs import validation

COMMAND_TIMEOUT_S = 60.0
MIN_LEASE_MS = 50
# Trials wait out a few leases per fault (a pause up to twenty): beyond a minute a single
# trial would take hours.
MAX_LEASE_MS = 60_000

# Every string ends up in an argv, the environment or a path: none may hold a NUL.
Text = Annotated[str, pydantic.AfterValidator(validation.check_text)]


def _env_name(name: str) -> str:
    """A name the OS accepts in an environment: not empty, no `=`, no NUL."""
    validation.check_text(name)
    if not name or "=" in name:
        raise ValueError(f"env name {name!r} is not a valid environment variable name")
    return name


EnvName = Annotated[str, pydantic.AfterValidator(_env_name)]


# Run by the worker's Python: the framework's version, then each `also` package's, or
# "not installed" for one it lacks (the framework itself missing exits with the error).
_VERSIONS = """
import importlib.metadata as m, sys
def of(package):
    try:
        return f"{package} {m.version(package)}"
    except m.PackageNotFoundError:
        return f"{package} not installed"
also = ", ".join(of(p) for p in sys.argv[2:])
print(m.version(sys.argv[1]) + (f" ({also})" if also else ""))
"""


class Framework(pydantic.BaseModel):
    """The framework an engine is built on, named in certification tables: `package` is the
    distribution whose version the engine's own interpreter reports (the worker command's
    Python, with the description's env and workdir), or `version`, a command printing it."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: Text
    package: Text
    version: list[Text] | None = None
    # Other distributions the engine's behaviour rests on (its model client, a checkpointer),
    # named beside the framework's version: "0.24.0 (openai 2.8.1)".
    also: list[Text] = []


class Upgrade(pydantic.BaseModel):
    """The engine's next version, which the `upgrade` fault resumes a run with (CONTRACT.md,
    section 5): its worker command, and optionally the migration it runs first (on the
    trial's database, once, before any worker of the next version starts) and the
    environment it adds to the description's `env`."""

    model_config = pydantic.ConfigDict(extra="forbid")

    worker: list[Text] = pydantic.Field(min_length=1)
    migrate: list[Text] | None = None
    env: dict[EnvName, Text] = pydantic.Field(default_factory=dict)

    @pydantic.model_validator(mode="after")
    def _placeholders(self) -> Upgrade:
        placeholders.check("worker", self.worker)
        if self.migrate:
            placeholders.check("migrate", self.migrate)
        return self


class EngineDescription(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: Text
    description: Text = ""
    migrate: list[Text]
    worker: list[Text]
    submit: list[Text]
    status: list[Text]
    # Optional: one long-lived process answering status questions on stdin/stdout instead
    # of a status command per poll (status_server.py; CONTRACT.md section 5).
    status_server: list[Text] | None = None
    export: list[Text] | None = None
    # Optional operator commands a scenario's `actions` use; without one, such a scenario
    # is INCONCLUSIVE for the engine (harness/trial/actions.py).
    approve: list[Text] | None = None
    reject: list[Text] | None = None
    cancel: list[Text] | None = None
    # Optional retention: `{run_id}`, delete a finished run and every record of it, so its
    # run key is free again (a scenario's `purge` action; CONTRACT.md section 5). It always
    # runs as a process with a worker's environment, so a fault can strike it mid-purge.
    purge: list[Text] | None = None
    env: dict[EnvName, Text] = pydantic.Field(default_factory=dict)
    lease_ms: int = pydantic.Field(default=1000, ge=MIN_LEASE_MS, le=MAX_LEASE_MS)
    # Where the commands run, relative to the description file.
    workdir: Text = "."
    # Optional in-process adapter: a module with migrate/submit/report/export(dsn, ...)
    # functions, used instead of the commands (workers always run as processes).
    python_adapter: Text | None = None
    # Modules a warm fork server imports once, so Python workers start in milliseconds
    # (harness/lab/forkserver.py; needs a `[python, -m, module, ...]` worker command).
    preload: list[Text] = pydantic.Field(default_factory=list)
    # "all", or the list of points the engine reports; [] means black box.
    boundaries: list[str] | str = "all"
    # Optional: the framework the engine is built on, for certification tables.
    framework: Framework | None = None
    # Optional: what the engine offers (tool transports, approve, cancel, purge, streaming);
    # unset fields follow the commands present (harness/engines/capabilities.py).
    capabilities: capabilities_module.Capabilities | None = None
    # Optional: the engine's own durable store, a server the lab starts per trial, and the
    # named links its workers reach it by (harness/engines/store.py).
    server: store.Server | None = None
    links: dict[str, store.Link] = pydantic.Field(default_factory=dict)
    # Optional: the engine's next version (a new worker, a migration): what the `upgrade`
    # fault resumes a run with; without it the class is not planned for the engine.
    upgrade: Upgrade | None = None

    @pydantic.model_validator(mode="after")
    def _store(self) -> EngineDescription:
        store.check(self.server, self.links)
        return self

    @pydantic.model_validator(mode="after")
    def _placeholders(self) -> EngineDescription:
        for command in placeholders.ALLOWED:
            argv = getattr(self, command, None)
            if command == "version" and self.framework is not None:
                argv = self.framework.version
            if argv:
                placeholders.check(command, argv)
        return self

    @pydantic.field_validator("boundaries")
    @classmethod
    def _known_points(cls, value: list[str] | str) -> list[str] | str:
        if isinstance(value, str):
            if value != "all":
                raise ValueError("boundaries is 'all' or a list of points")
            return value
        unknown = [point for point in value if not boundaries_module.is_known(point)]
        if unknown:
            raise ValueError(f"unknown boundary points {unknown}")
        return value

    @pydantic.model_validator(mode="after")
    def _preload_needs_a_module_worker(self) -> EngineDescription:
        # A fork of the warm server runs a module (`runpy`), never a script: a script
        # worker would be exec'd cold, and the server would import under our Python.
        if self.preload and not (len(self.worker) >= 3 and self.worker[1] == "-m"):
            shown = " ".join(self.worker)
            raise ValueError(
                f"preload needs a worker started as a module, `[python, -m, module, ...]`; "
                f"worker {shown!r} is a script: write it as "
                f'["{{python}}", "-m", "<module>", ...] (python -m module), or drop preload'
            )
        return self


class CommandEngine:
    def __init__(self, description: EngineDescription, *, base_dir: pathlib.Path) -> None:
        self.description = description
        self.name = description.name
        self.lease_ms = description.lease_ms
        self.preload: tuple[str, ...] = tuple(description.preload)
        self._base_dir = (base_dir / description.workdir).resolve()
        self._module: Any | None = None
        self._server: status_server.StatusServer | None = None
        # Each trial's store addresses (the server itself), by the trial's DSN: the
        # commands of one trial reach its own server (harness/lab/store_links.py).
        self._store_env: dict[str, dict[str, str]] = {}
        points = description.boundaries
        self.boundaries: tuple[str, ...] = (
            tuple(boundaries_module.all_points()) if points == "all" else tuple(points)
        )

    @property
    def cwd(self) -> str:
        return str(self._base_dir)

    def _argv(self, template: list[str], **values: str) -> list[str]:
        values = {"python": sys.executable, **values}
        return [part.format(**values) for part in template]

    def _env(self, dsn: str | None) -> dict[str, str]:
        """A command's environment; without `dsn` (a status server: each question names its
        database) no DATABASE_URL."""
        env = adapter.inherited_environment()
        env.update(self.description.env)
        if dsn is not None:
            env["DATABASE_URL"] = dsn
            env.update(self._store_env.get(dsn, {}))
        return env

    def bind_store(self, dsn: str, env: Mapping[str, str] | None) -> None:
        """The store variables of the trial on `dsn` (None: the trial is over)."""
        if env is None:
            self._store_env.pop(dsn, None)
        else:
            self._store_env[dsn] = dict(env)

    def _run(
        self,
        what: str,
        argv: list[str],
        dsn: str,
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                env={**self._env(dsn), **(env or {})},
                cwd=self.cwd,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise errors.CrashcertError(f"engine {self.name}: {what} failed: {error}") from None
        if done.returncode != 0:
            raise errors.CrashcertError(
                f"engine {self.name}: {what} exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )
        return done.stdout

    def _in_process(self, name: str) -> Any | None:
        """The adapter module's function `name`, or None to use the command."""
        if not self.description.python_adapter:
            return None
        if self._module is None:
            try:
                self._module = importlib.import_module(self.description.python_adapter)
            except ImportError as error:
                raise errors.CrashcertError(
                    f"engine {self.name}: cannot import python_adapter "
                    f"{self.description.python_adapter!r}: {error}"
                ) from None
        return getattr(self._module, name, None)

    def migrate(self, dsn: str) -> None:
        function = self._in_process("migrate")
        if function is not None:
            _call(self.name, "migrate", function, dsn)
            return
        self._run("migrate", self._argv(self.description.migrate), dsn)

    def worker_command(self) -> list[str]:
        return self._argv(self.description.worker)

    def worker_env(self) -> Mapping[str, str]:
        return self.description.env

    def upgrade_worker_command(self) -> list[str] | None:
        """argv of a worker of the next version, or None when the engine names none."""
        upgrade = self.description.upgrade
        return None if upgrade is None else self._argv(upgrade.worker)

    def upgrade_worker_env(self) -> Mapping[str, str]:
        upgrade = self.description.upgrade
        return {**self.description.env, **(upgrade.env if upgrade else {})}

    def upgrade_migrate(self, dsn: str) -> bool:
        """Run the next version's migration on `dsn`; False when it has none."""
        upgrade = self.description.upgrade
        if upgrade is None or not upgrade.migrate:
            return False
        self._run("upgrade migrate", self._argv(upgrade.migrate), dsn, env=upgrade.env)
        return True

    def submit(self, dsn: str, run_input: run_report.RunInput) -> str:
        function = self._in_process("submit")
        if function is not None:
            return str(_call(self.name, "submit", function, dsn, run_input.model_dump(mode="json")))
        out = self._run(
            "submit", self._argv(self.description.submit), dsn, stdin=run_input.model_dump_json()
        )
        try:
            run_id = json.loads(out)["run_id"]
        except (ValueError, KeyError, TypeError):
            raise errors.CrashcertError(
                f'engine {self.name}: submit must print {{"run_id": ...}}, got {out[:500]!r}'
            ) from None
        return str(run_id)

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        function = self._in_process("report")
        if function is not None:
            out = json.dumps(_call(self.name, "report", function, dsn, run_id))
        elif self.description.status_server:
            out = self._status_server().ask(dsn, run_id)
        else:
            out = self._run("status", self._argv(self.description.status, run_id=run_id), dsn)
        try:
            return run_report.RunReport.model_validate_json(out)
        except pydantic.ValidationError as error:
            raise errors.CrashcertError(
                f"engine {self.name}: status printed an invalid run report: {error}"
            ) from None

    def export(self, dsn: str, run_id: str) -> dict[str, list[dict[str, Any]]] | None:
        function = self._in_process("export")
        if function is not None:
            tables = _call(self.name, "export", function, dsn, run_id)
        elif not self.description.export:
            return None
        else:
            out = self._run("export", self._argv(self.description.export, run_id=run_id), dsn)
            try:
                tables = json.loads(out)
            except ValueError:
                raise errors.CrashcertError(f"engine {self.name}: export printed no JSON") from None
        if not isinstance(tables, dict):
            raise errors.CrashcertError(f"engine {self.name}: export must print an object")
        return tables

    def _status_server(self) -> status_server.StatusServer:
        if self._server is None:
            self._server = status_server.StatusServer(
                self._argv(self.description.status_server or []),
                cwd=self.cwd,
                env=self._env(None),
                name=self.name,
                timeout_s=COMMAND_TIMEOUT_S,
            )
        return self._server

    def done_with(self, dsn: str) -> None:
        """The harness is done with this database: the adapter may close what it kept."""
        function = self._in_process("forget")
        if function is not None:
            _call(self.name, "forget", function, dsn)

    def close(self) -> None:
        """Stops the status server, if one was started."""
        if self._server is not None:
            self._server.close()

    def framework_version(self) -> str:
        """The framework's version as the engine's workers see it, never the harness's."""
        framework = self.description.framework
        if framework is None:
            return ""
        argv = self._argv(framework.version) if framework.version else self._probe(framework)
        if argv is None:
            return "unknown (the worker command names no Python: give framework.version)"
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, env=self._env(None), cwd=self.cwd,
                timeout=COMMAND_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"unknown ({error})"
        if done.returncode != 0:
            found = "PackageNotFoundError" in done.stderr
            return "not installed" if found else f"unknown (exit {done.returncode})"
        return done.stdout.strip() or "unknown (printed nothing)"

    def _probe(self, framework: Framework) -> list[str] | None:
        """The worker's interpreter asked for the package's version, when it is a Python."""
        interpreter = self.worker_command()[0] if self.description.worker else ""
        if not pathlib.Path(interpreter).name.startswith("python"):
            return None
        return [interpreter, "-c", _VERSIONS, framework.package, *framework.also]

    def purge_command(self, run_id: str) -> list[str] | None:
        """argv of the purge command for `run_id`, or None when the engine has none."""
        if not self.description.purge:
            return None
        return self._argv(self.description.purge, run_id=run_id)

    def can(self, action: str) -> bool:
        """Whether the engine offers an operator command (approve, reject, cancel)."""
        return self._in_process(action) is not None or bool(getattr(self.description, action))

    def act(self, dsn: str, action: str, run_id: str, tool_call_id: str | None = None) -> None:
        """Approve or reject `tool_call_id` (the model's tool-call id), or cancel the run."""
        args = (run_id,) if action == "cancel" else (run_id, tool_call_id or "")
        function = self._in_process(action)
        if function is not None:
            _call(self.name, action, function, dsn, *args)
            return
        template = getattr(self.description, action)
        if not template:
            raise errors.CrashcertError(f"engine {self.name}: no {action} command")
        values = {"run_id": run_id, "tool_call_id": tool_call_id or ""}
        self._run(action, self._argv(template, **values), dsn)


def _call(engine: str, what: str, function: Any, *args: Any) -> Any:
    """An in-process adapter call; its failure is the engine's, reported like a command's."""
    try:
        return function(*args)
    except Exception as error:
        raise errors.CrashcertError(
            f"engine {engine}: {what} failed: {type(error).__name__}: {error}"
        ) from None


def load(path: str | pathlib.Path) -> CommandEngine:
    path = pathlib.Path(path)
    data = validation.read_yaml(path, what="engine description")
    description = validation.parse(
        EngineDescription, data, source=str(path), what="engine description"
    )
    return CommandEngine(description, base_dir=path.resolve().parent)


def reference_description_path() -> pathlib.Path:
    return pathlib.Path(str(importlib.resources.files("reference_engine") / "engine.yaml"))


def find(name_or_path: str | None) -> CommandEngine:
    """`reference` (default) or a path to an engine description file."""
    if name_or_path in (None, "", "reference"):
        return load(reference_description_path())
    return load(name_or_path)
