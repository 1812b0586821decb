"""What three broken engines share: executing again, at the start of a claim, tool calls
the run already settled. The call goes to the tool service once more with its own key and
declaration (a service that does not honour keys applies the effect again); the recorded
outcome stays as it was, so nothing but the world's ledger shows the repeat.
"""

from __future__ import annotations

import collections.abc
import logging

from reference_engine import checkpoint, errors, leases, reads
from reference_engine import state as state_module
from reference_engine import worker as worker_module

logger = logging.getLogger(__name__)
SUCCEEDED = "succeeded"

# Which settled calls to execute again, given the claimed run and its new lease.
Choose = collections.abc.Callable[
    [state_module.RunState, leases.Lease], collections.abc.Iterable[state_module.ToolCall]
]


def current_round(run: state_module.RunState) -> list[state_module.ToolCall]:
    """The calls of the batch the run is working through (none outside tools_pending)."""
    if run.phase != "tools_pending":
        return []
    turn = checkpoint.load(run.checkpoint, checkpoint_version=run.checkpoint_version).turn
    return sorted((c for c in run.tool_calls if c.turn == turn), key=lambda c: c.position)


def patch_claims(choose: Choose) -> None:
    """Worker.process, preceded by executing `choose`'s calls again."""
    process = worker_module.Worker.process

    def rerun_then_process(self: worker_module.Worker, lease: leases.Lease) -> None:
        try:
            run = reads.load(self.db, lease.run_id)
            for call in choose(run, lease):
                if call.state == SUCCEEDED:
                    logger.info("run %s: executing %s again", lease.run_id, call.tool_call_id)
                    self.services.run_tool(
                        call.name, call.arguments, call.key, call.declaration or {}
                    )
        except errors.EngineError as error:
            # best effort, like the bug: the claim goes on as usual
            logger.warning("run %s: re-run failed: %s", lease.run_id, error)
        process(self, lease)

    worker_module.Worker.process = rerun_then_process  # type: ignore[method-assign]
