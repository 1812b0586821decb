"""Broken variant of the reference engine: when it recovers a run whose decision for the
current turn is already committed (frontier `tools_pending`), it asks the model again.

    python tests/quality/engines/recall_model.py worker   (see recall_model.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import checkpoint as checkpoint_module
from reference_engine import cli, decide
from reference_engine import state as state_module

_next_action = decide.next_action


def next_action(run: state_module.RunState, known: state_module.Known) -> decide.Action:
    action = _next_action(run, known)
    if run.phase != "tools_pending" or isinstance(action, decide.Stop | decide.Finish):
        return action
    point = checkpoint_module.load(run.checkpoint, checkpoint_version=run.checkpoint_version)
    decided = [c for c in run.model_calls if c.turn == point.turn and c.state == "recorded"]
    if not decided:
        return action
    call = decided[-1]
    if call.lease_epoch != known.lease_epoch and call.id not in known.model_results:
        # BROKEN: "refresh" a decision made under an earlier lease by asking the model again
        return decide.CallModel(call.id)
    return action


def install() -> None:
    # the worker looks next_action up on the module at call time
    decide.next_action = next_action


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
