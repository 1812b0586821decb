"""Which crashcert made a trial: the installed version, and the git revision of a checkout."""

from __future__ import annotations

import functools
import importlib.metadata
import pathlib
import subprocess

DISTRIBUTION = "crashcert"
GIT_TIMEOUT_S = 5


@functools.cache
def version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


@functools.cache
def git_revision() -> str | None:
    """HEAD of the checkout this code runs from; None for an installed package.

    Asked only where the package's parent is crashcert's own checkout: an installed wheel
    may sit in a virtualenv inside the user's repository, whose HEAD is not ours.
    """
    root = pathlib.Path(__file__).resolve().parent.parent
    if not (root / ".git").exists() or not (root / "harness" / "CONTRACT.md").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None
