"""Broken variant of the reference engine: when an attempt died in a model call, the
retry starts the run over, as a workflow retried whole would: every tool call the run
already executed is executed again before it goes on (agentarea/agentarea#320).

    python tests/quality/engines/retry_whole_run.py worker   (see retry_whole_run.yaml)
"""

from __future__ import annotations

import collections.abc
import sys

from reference_engine import checkpoint, cli, leases
from reference_engine import state as state_module
from tests.quality.engines import rerun

MODEL_PENDING = "model_pending"


def whole_run(
    run: state_module.RunState, lease: leases.Lease
) -> collections.abc.Iterable[state_module.ToolCall]:
    if run.phase != MODEL_PENDING:
        return []
    point = checkpoint.load(run.checkpoint, checkpoint_version=run.checkpoint_version)
    call = next((c for c in run.model_calls if c.id == point.model_call_id), None)
    if call is None or call.lease_epoch == lease.epoch:
        return []
    # BROKEN: the model call failed under an earlier attempt: retry the run from its start
    return sorted(run.tool_calls, key=lambda c: (c.turn, c.position))


def install() -> None:
    rerun.patch_claims(whole_run)


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
