"""Find the PostgreSQL server binaries (initdb, pg_ctl, postgres) on this machine."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

from harness import errors

# Debian/Ubuntu keep one directory per major version here; pg_config may point elsewhere.
DEBIAN_ROOT = pathlib.Path("/usr/lib/postgresql")
REQUIRED = ("initdb", "pg_ctl", "postgres")
BINDIR_ENV = "CRASHCERT_PG_BINDIR"


def find_bindir() -> pathlib.Path:
    """The directory holding initdb, pg_ctl and postgres.

    Order: $CRASHCERT_PG_BINDIR, `pg_config --bindir`, PATH, the newest /usr/lib/postgresql/*/bin.
    """
    for candidate in _candidates():
        if _complete(candidate):
            return candidate
    raise errors.EnvironmentProblem(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found: install the server "
        "package (e.g. apt-get install postgresql), set CRASHCERT_PG_BINDIR, or point "
        "CRASHCERT_PG_DSN at an existing server"
    )


def _candidates() -> list[pathlib.Path]:
    found: list[pathlib.Path] = []
    env = os.environ.get(BINDIR_ENV)
    if env:
        found.append(pathlib.Path(env))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                found.append(pathlib.Path(out))
        except (OSError, subprocess.SubprocessError):
            pass  # a broken pg_config is not fatal: other places may still have binaries
    on_path = shutil.which("pg_ctl")
    if on_path:
        found.append(pathlib.Path(on_path).resolve().parent)
    found.extend(_debian_bindirs())
    return found


def _debian_bindirs() -> list[pathlib.Path]:
    if not DEBIAN_ROOT.is_dir():
        return []
    versions = [p for p in DEBIAN_ROOT.iterdir() if re.fullmatch(r"\d+(\.\d+)?", p.name)]
    versions.sort(key=lambda p: tuple(int(x) for x in p.name.split(".")), reverse=True)
    return [v / "bin" for v in versions]


def _complete(bindir: pathlib.Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in REQUIRED)
