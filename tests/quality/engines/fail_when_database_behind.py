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

_fenced = transitions.Transitions._fenced
_load = reads.load


def _cache() -> pathlib.Path:
    """The cache every worker of the trial shares: run id -> the highest version committed.

    It sits beside the trial's control socket, in the directory the harness makes for the
    trial and removes after it, so no trial leaves files behind (read per call: a forked
    worker gets its environment after import).
    """
    control = os.environ.get("CRASHCERT_CONTROL")
    if control:
        return pathlib.Path(control).parent / "version-cache"
    return pathlib.Path(tempfile.gettempdir()) / f"crashcert-version-cache-{os.getuid()}"


def _cached(run_id: str) -> int:
    try:
        return int((_cache() / run_id).read_text())
    except (OSError, ValueError):
        return 0


def _remembering(self: transitions.Transitions, lease: Any, body: Any) -> transitions.Mark:
    mark = _fenced(self, lease, body)
    version = mark.detail.get("frontier_version")
    if isinstance(version, int) and version > _cached(lease.run_id):
        cache = _cache()
        cache.mkdir(mode=0o700, exist_ok=True)
        scratch = cache / f".{lease.run_id}.{os.getpid()}"
        scratch.write_text(str(version))
        scratch.replace(cache / lease.run_id)
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
