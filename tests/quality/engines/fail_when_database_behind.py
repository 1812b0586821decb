"""Broken variant of the reference engine: it trusts its cache over the database. Its
workers keep the last checkpoint version they committed in a cache beside the database
(files here, Redis in production); when a re-read finds the run's checkpoint older than the
cached one, the worker takes the database for corrupt and fails the run. A checkpoint never
goes back while the database keeps what it acknowledged, so it passes a trial without
faults and under a synchronous failover; an asynchronous one, which loses the last
acknowledged commits, ends the run `failed`, and `run.liveness` stays strict there
(CONTRACT.md section 7, "Lost acknowledged commits").

The reference engine goes on from what the database has: the state that survived.

    python tests/quality/engines/fail_when_database_behind.py worker   (see its .yaml)
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
from typing import Any

from reference_engine import cli, errors, reads, transitions

# The cache every worker of the machine shares: run id -> the highest version committed.
CACHE = pathlib.Path(tempfile.gettempdir()) / f"crashcert-version-cache-{os.getuid()}"
_fenced = transitions.Transitions._fenced
_load = reads.load


def _cached(run_id: str) -> int:
    try:
        return int((CACHE / run_id).read_text())
    except (OSError, ValueError):
        return 0


def _remembering(self: transitions.Transitions, lease: Any, body: Any) -> transitions.Mark:
    mark = _fenced(self, lease, body)
    version = mark.detail.get("frontier_version")
    if isinstance(version, int) and version > _cached(lease.run_id):
        CACHE.mkdir(mode=0o700, exist_ok=True)
        scratch = CACHE / f".{lease.run_id}.{os.getpid()}"
        scratch.write_text(str(version))
        scratch.replace(CACHE / lease.run_id)
    return mark


def _load_trusting_memory(db: Any, run_id: str) -> Any:
    run = _load(db, run_id)
    cached = _cached(run_id)
    if run.frontier_version < cached:
        # BROKEN: "the database lost our checkpoint: it is corrupt"; the run is failed
        raise errors.CheckpointInvalid(
            f"checkpoint {run.frontier_version} is older than {cached}, the cached one"
        )
    return run


def install() -> None:
    transitions.Transitions._fenced = _remembering  # type: ignore[method-assign]
    reads.load = _load_trusting_memory


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
