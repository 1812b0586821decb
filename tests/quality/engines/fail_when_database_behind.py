"""Broken variant of the reference engine: it trusts its memory over the database. When a
re-read finds the run's checkpoint older than one this process committed, it takes the
database for corrupt and fails the run. A checkpoint never goes back while the database
keeps what it acknowledged, so it passes a trial without faults and under a synchronous
failover; an asynchronous one, which loses the last acknowledged commits, ends the run
`failed`, and `run.liveness` stays strict there (CONTRACT.md section 7, "Lost
acknowledged commits").

The reference engine goes on from what the database has: the state that survived.

    python tests/quality/engines/fail_when_database_behind.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, errors, reads, transitions

# run id -> the highest frontier version this process committed
_committed: dict[str, int] = {}
_fenced = transitions.Transitions._fenced
_load = reads.load


def _remembering(self: transitions.Transitions, lease: Any, body: Any) -> transitions.Mark:
    mark = _fenced(self, lease, body)
    version = mark.detail.get("frontier_version")
    if isinstance(version, int):
        _committed[lease.run_id] = max(version, _committed.get(lease.run_id, 0))
    return mark


def _load_trusting_memory(db: Any, run_id: str) -> Any:
    run = _load(db, run_id)
    if run.frontier_version < _committed.get(run_id, 0):
        # BROKEN: "the database lost our checkpoint: it is corrupt"; the run is failed
        raise errors.CheckpointInvalid(
            f"checkpoint {run.frontier_version} is older than {_committed[run_id]}, "
            "which this worker committed"
        )
    return run


def install() -> None:
    transitions.Transitions._fenced = _remembering  # type: ignore[method-assign]
    reads.load = _load_trusting_memory


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
