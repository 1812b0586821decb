"""Broken variant of the reference engine: a batch's progress lives in the worker, like a
tool node's between LangGraph interrupts. The worker remembers which calls it executed
itself; a claim that resumes a batch executes again every settled call it has no memory
of (the node replays). One worker parking for approval and resuming is fine; a worker
that resumes another's batch runs its tools a second time
(rancher/rancher-ai-agent#109).

    python tests/quality/engines/replay_tool_node.py worker   (see replay_tool_node.yaml)
"""

from __future__ import annotations

import collections.abc
import sys

from reference_engine import cli, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module
from tests.quality.engines import rerun

# Command ids this process executed: the node's progress, never made durable.
EXECUTED: set[str] = set()
_run_tool = worker_module.Worker._run_tool


def run_tool(
    self: worker_module.Worker,
    lease: leases.Lease,
    call: state_module.ToolCall,
    declaration: dict[str, object],
    memo: worker_module.Memo,
) -> None:
    EXECUTED.add(call.id)
    _run_tool(self, lease, call, declaration, memo)


def unknown_to_me(
    run: state_module.RunState, lease: leases.Lease
) -> collections.abc.Iterable[state_module.ToolCall]:
    # BROKEN: settled calls of the open batch that this process did not run are run again
    again = [call for call in rerun.current_round(run) if call.settled and call.id not in EXECUTED]
    EXECUTED.update(call.id for call in again)
    return again


def install() -> None:
    worker_module.Worker._run_tool = run_tool  # type: ignore[method-assign]
    rerun.patch_claims(unknown_to_me)


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
