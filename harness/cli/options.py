"""Command-line options shared by the verbs, and the one place user paths become absolute.

Workers run in the engine's working directory (and fork servers in theirs), so a relative
path that reached them would name another file: every path the user gives, and every
default, is resolved against the user's directory here, before anything is started.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Iterable
from typing import Any

import click

from harness import errors
from harness.faults import spec as fault_spec
from harness.lab import isolation
from harness.scenario import schema as scenario_module

DEFAULT_OUT = "crashcert-trials"
# The fault classes as the catalog names them (harness/faults/spec.py).
_FAULT_CLASSES = ", ".join(fault_spec.MATRIX)
FAULTS_HELP = f"Fault classes to expand (comma-separated: {_FAULT_CLASSES})."
FAULTS_DRAWN_HELP = f"Fault classes to draw from (comma-separated: {_FAULT_CLASSES})."
REFERENCE = "reference"
SCENARIO_SUFFIXES = (".yaml", ".yml")
MAX_SAME_SECOND_DIRS = 1000


def absolute(path: str | pathlib.Path) -> pathlib.Path:
    """Absolute without resolving links (a user's link stays what they named)."""
    return pathlib.Path(path).expanduser().absolute()


def engine_ref(value: str | None) -> str:
    """'reference', or the absolute path of an engine description file."""
    if value in (None, "", REFERENCE):
        return REFERENCE
    return str(absolute(value))


def scenario_ref(value: str) -> str:
    """A bundled scenario's name stays a name; a file becomes its absolute path."""
    candidate = pathlib.Path(value)
    if candidate.suffix in SCENARIO_SUFFIXES or candidate.exists():
        return str(absolute(candidate))
    return value


def new_out_dir(out: str | None) -> pathlib.Path:
    """A fresh directory below `out` for this invocation, made atomically (never shared)."""
    base = absolute(out or DEFAULT_OUT)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, MAX_SAME_SECOND_DIRS + 1):
        candidate = base / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise click.ClickException(f"{base}: {MAX_SAME_SECOND_DIRS} runs this second already")


def scenarios(names: tuple[str, ...]) -> list[tuple[str, scenario_module.Scenario]]:
    """The scenarios named (as the user named them), or every bundled one."""
    if names:
        return [(name, scenario_module.find(name)) for name in names]
    return [(s.name, s) for s in scenario_module.load_all()]


def _engine_callback(context: click.Context, param: click.Parameter, value: str | None) -> str:
    return engine_ref(value)


def _scenario_callback(context: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(scenario_ref(item) for item in value)
    return scenario_ref(value)


def _path_callback(context: click.Context, param: click.Parameter, value: str | None) -> Any:
    return None if value is None else str(absolute(value))


def _file_callback(context: click.Context, param: click.Parameter, value: str | None) -> Any:
    """An output file, refused before any trial runs when it can never be written: a
    directory, or a path under a file (the trials' time would be lost to it)."""
    if value is None:
        return None
    path = absolute(value)
    flag = param.opts[0] if param.opts else "a report"
    if path.is_dir():
        raise errors.CrashcertError(f"{flag} {path}: a directory, not a file")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise errors.CrashcertError(f"{flag} {path}: {parent} is not a directory")
            break
    return str(path)


def _out_callback(context: click.Context, param: click.Parameter, value: str | None) -> Any:
    """Refused before any trial runs: a path under a file can never hold a trial."""
    if value is None:
        return None
    path = absolute(value)
    for parent in [path, *path.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise errors.CrashcertError(f"--out {path}: {parent} is not a directory")
            if not os.access(parent, os.W_OK | os.X_OK) or _pseudo(parent):
                raise errors.CrashcertError(f"--out {path}: {parent} cannot hold new files")
            break
    return str(path)


out_callback = _out_callback  # for verbs whose --out has a default of its own (merge)


def _pseudo(path: pathlib.Path) -> bool:
    """/proc and /sys look writable to root, yet no directory can be made in them."""
    return path.resolve().parts[1:2] in (("proc",), ("sys",))


def _pg_callback(context: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A DSN libpq cannot parse, refused up front; the message never repeats it (it may hold
    a password)."""
    if value is None:
        return None
    import psycopg.conninfo  # only for verbs that take --pg-dsn

    try:
        psycopg.conninfo.conninfo_to_dict(value)
    except psycopg.Error:
        raise errors.CrashcertError(
            "--pg-dsn: not a libpq connection string or URI (e.g. postgresql://user@host:5432/db)"
        ) from None
    return value


def engine_option(function: Any) -> Any:
    return click.option(
        "--engine",
        "engine_ref",
        default=REFERENCE,
        show_default=True,
        callback=_engine_callback,
        help="'reference' or the path of an engine description file (harness/CONTRACT.md).",
    )(function)


class ProcessOwner:
    """The root context's obj when crashcert is the program (`entry`), not a library call."""


def isolation_option(function: Any) -> Any:
    return click.option(
        "--isolation",
        type=click.Choice(isolation.MODES),
        default="auto",
        show_default=True,
        envvar="CRASHCERT_ISOLATION",
        help="Give the lab a private network namespace no other local user can reach. auto: "
        "when the lab owns every part (embedded Postgres); netns: or exit 3; off: for engines "
        "that need outside network (a real model endpoint).",
    )(function)


def private_network(pg_dsn: str | None) -> isolation.State:
    """Apply --isolation: call it before the verb's lab starts any thread or child."""
    root = click.get_current_context().find_root()
    return isolation.apply(
        str(root.params.get("isolation") or "auto"),
        pg_dsn=pg_dsn,
        owns_process=isinstance(root.obj, ProcessOwner),
    )


def refuse_pg_restart(pg_dsn: str | None, *, asked: bool, how: str) -> None:
    """A Postgres restart (or a failover, which stops the primary and needs a standby made
    from it) needs a cluster the harness owns: against `--pg-dsn` it would fail mid-run (or
    take down someone's server), so it is refused before anything starts."""
    if pg_dsn is not None and asked:
        raise errors.CrashcertError(
            f"{how}: pg_restart and pg_failover stop Postgres, and a --pg-dsn / "
            "CRASHCERT_PG_DSN server is never restarted or failed over; leave them out, or "
            "run without the DSN (the embedded cluster)"
        )


def stops_postgres(fault_classes: Iterable[str]) -> bool:
    """Whether any of these fault classes stops the lab's Postgres (pg_restart, pg_failover)."""
    return bool(set(fault_classes) & fault_spec.STOPS_POSTGRES)


def pg_option(function: Any) -> Any:
    return click.option(
        "--pg-dsn",
        envvar="CRASHCERT_PG_DSN",
        default=None,
        callback=_pg_callback,
        help="Use this PostgreSQL server instead of an embedded throwaway cluster. Its "
        "password is visible to local users in the process list while crashcert runs: prefer "
        "CRASHCERT_PG_DSN, PGPASSWORD or ~/.pgpass.",
    )(function)


def scenario_option(*, multiple: bool = False, **kwargs: Any) -> Any:
    name = "scenario_names" if multiple else "scenario_name"
    help_text = "Scenario name or file" + (" (repeat)." if multiple else ".")
    return click.option(
        "--scenario",
        name,
        multiple=multiple,
        callback=_scenario_callback,
        help=help_text,
        **kwargs,
    )


def _jobs_callback(context: click.Context, param: click.Parameter, value: str) -> Any:
    from harness.pool import autojobs

    try:
        return autojobs.parse(value)
    except errors.CrashcertError as error:
        raise click.BadParameter(str(error)) from error


def jobs_option(function: Any) -> Any:
    # Trials mostly wait (on leases, heals, backoffs): at a fixed 2 on 2 cores a certify left
    # three quarters of the CPU idle, so the default follows the measured load instead.
    return click.option(
        "--jobs",
        default="auto",
        show_default=True,
        callback=_jobs_callback,
        help="Fault trials run this many at a time; auto: start at 2 and follow the "
        "measured load (CPU pressure, load average, how fast trials start), at most 4 per core.",
    )(function)


def shard_option(function: Any) -> Any:
    return click.option(
        "--shard",
        "shard_text",
        default=None,
        metavar="I/N",
        help="Run the I-th of N shards of the fault trials (and every baseline); "
        "`crashcert merge` combines the shards' output directories.",
    )(function)


def out_option(function: Any) -> Any:
    return click.option(
        "--out",
        default=None,
        callback=_out_callback,
        help=f"Trial directories go below this ({DEFAULT_OUT}/).",
    )(function)


def file_option(flag: str, dest: str, help_text: str) -> Any:
    """An output file (--json, --junit, --markdown), absolute like every other path."""
    return click.option(flag, dest, default=None, callback=_file_callback, help=help_text)


def directory_argument(name: str) -> Any:
    return click.argument(name, type=click.Path(exists=True, file_okay=False, resolve_path=True))


def file_argument(name: str) -> Any:
    return click.argument(name, type=click.Path(exists=True, dir_okay=False, resolve_path=True))
