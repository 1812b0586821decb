"""Broken variant of the reference engine: a tool call's writes (that it began, and what it
returned) are put after the call returned, as a graph framework puts a task's writes after
its node ran; nothing durable says the call began before its effect. A worker killed after
the effect, before those writes committed, leaves a decision whose call looks unsent, and
the run's next owner sends it again (langchain-ai/langgraph#8039: under
durability="sync" the task's put_writes and the superseding checkpoint's put race on
background threads; a crash during put, with the writes not yet durable, re-executes the
node and duplicates its side effects).

    python tests/quality/engines/writes_after_node.py worker   (see writes_after_node.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, decide, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module

_execute = worker_module.Worker.execute


def execute(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    action: decide.Action,
    memo: worker_module.Memo,
) -> None:
    if not isinstance(action, decide.StartTool):
        _execute(self, lease, run, action, memo)
        return
    call = worker_module._tool(run, action.command_id)
    leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
    # BROKEN: the node runs first; its writes follow it, so a crash in between leaves no trace
    result = self.services.run_tool(call.name, call.arguments, call.key, call.declaration or {})
    self.runs.start_tool(
        lease,
        command_id=call.id,
        key=call.key,
        tool_call_id=call.tool_call_id,
        charge=action.charge,
    )
    self.reporter.report(
        "tool.returned",
        lease.run_id,
        tool_call_id=call.tool_call_id,
        key=call.key,
        state=result.state,
    )
    self.runs.settle_tool(
        lease,
        command_id=call.id,
        tool_call_id=call.tool_call_id,
        key=call.key,
        state=result.state,
        outcome=result.outcome,
    )


def install() -> None:
    # the worker looks execute up on its class at call time
    worker_module.Worker.execute = execute  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
