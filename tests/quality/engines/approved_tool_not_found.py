"""Broken variant of the reference engine: the tools a run may call are kept in a registry
in the worker's memory, filled when that worker asks the model for the run. A call that
waited for an operator's approval is executed from that registry; a worker that resumes
the run after a restart never asked the model for it, finds no entry, and settles the
approved call as a missing tool. The error becomes the tool's result and the run goes on
without the approved effect (mastra-ai/mastra#24787: a durable agent's `globalRunRegistry`
lost to a restart, `ToolNotFoundError` for the approved, search-loaded tool).

    python tests/quality/engines/approved_tool_not_found.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, decide, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module

APPROVED = "approved"
# run id -> the tool names this process loaded for it (as Mastra's in-process run registry)
REGISTRY: dict[str, set[str]] = {}
_call_model = worker_module.Worker._call_model
_execute = worker_module.Worker.execute


def call_model(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    call_id: str,
    memo: worker_module.Memo,
) -> None:
    _call_model(self, lease, run, call_id, memo)
    if call_id in memo.model_answers:
        _answer, declarations = memo.model_answers[call_id]
        REGISTRY.setdefault(lease.run_id, set()).update(declarations)


def execute(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    action: decide.Action,
    memo: worker_module.Memo,
) -> None:
    if isinstance(action, decide.StartTool):
        call = next(c for c in run.tool_calls if c.id == action.command_id)
        # BROKEN: the approved call is looked up in this process's registry only
        if call.approval == APPROVED and call.name not in REGISTRY.get(lease.run_id, set()):
            self.runs.start_tool(
                lease,
                command_id=call.id,
                key=call.key,
                tool_call_id=call.tool_call_id,
                charge=action.charge,
            )
            self.runs.settle_tool(
                lease,
                command_id=call.id,
                tool_call_id=call.tool_call_id,
                key=call.key,
                state="failed",
                outcome={"error": f'ToolNotFoundError: Tool "{call.name}" not found'},
            )
            return
    _execute(self, lease, run, action, memo)


def install() -> None:
    worker_module.Worker._call_model = call_model  # type: ignore[method-assign]
    worker_module.Worker.execute = execute  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
