"""Broken variant of the reference engine's next release: it takes every stored recovery
point to be in its own format 2 already ("the migration rewrote them"), so a format 1
checkpoint, which a run started before the upgrade carries, is read with a fresh turn state:
turn 0, no decision, no open model call. Version N is the reference engine, and so is the
next release on a run it started itself: kills alone never show it.

    python -m tests.quality.engines.upgrade_misreads_old_checkpoints --release next worker
    (see upgrade_misreads_old_checkpoints.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import checkpoint, cli

_load = checkpoint.load
FRESH_TURN = {"turn": 0, "decision": None, "model_call_id": None}


def load(payload: Any, *, checkpoint_version: int | None = None) -> checkpoint.Checkpoint:
    if isinstance(payload, dict) and payload.get("v") == checkpoint.CHECKPOINT_VERSION:
        # BROKEN: an old payload read as a new one, its missing turn state defaulted
        rest = {key: value for key, value in payload.items() if key not in FRESH_TURN}
        payload = {**rest, "v": checkpoint.NEXT_FORMAT, "turn_state": dict(FRESH_TURN)}
        checkpoint_version = checkpoint.NEXT_FORMAT
    return _load(payload, checkpoint_version=checkpoint_version)


def install() -> None:
    # decide looks load up on the checkpoint module at call time
    checkpoint.load = load


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
