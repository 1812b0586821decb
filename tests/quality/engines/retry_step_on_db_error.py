"""Broken variant of the reference engine: when recording a tool's outcome fails because
the database went away (a failover, a restart: the connection died under it), it runs the
whole step again, the tool call included, as a retry decorator around "call the tool, then
record it" does. Nothing changes while the database stays up, so it passes a trial without
database faults; a failover at `tool.returned` refunds twice.

The reference engine keeps the outcome it already has (in memory, then re-read from the
database once it is back): the effect happened, only its record is missing.

    python tests/quality/engines/retry_step_on_db_error.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, errors, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module


def _run_tool(
    self: worker_module.Worker,
    lease: leases.Lease,
    call: state_module.ToolCall,
    declaration: dict[str, Any],
    memo: worker_module.Memo,
) -> None:
    # The lease is checked once, as the step begins; the retry wraps only "call the tool,
    # then record it", as a retry decorator around the step does. (Checked again inside the
    # loop, the bug hid whenever the standby took the run over first: after a failover the
    # promoted database holds no session lock, so that takeover is immediate, a race.)
    leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
    delay = self._db_backoff()
    while True:
        memo.tools_sent.add(call.id)
        result = self.services.run_tool(call.name, call.arguments, call.key, declaration)
        self.reporter.report(
            "tool.returned",
            lease.run_id,
            tool_call_id=call.tool_call_id,
            key=call.key,
            state=result.state,
        )
        memo.tool_results[call.id] = result
        try:
            self.runs.settle_tool(
                lease,
                command_id=call.id,
                tool_call_id=call.tool_call_id,
                key=call.key,
                state=result.state,
                outcome=result.outcome,
            )
            return
        except errors.DatabaseUnavailable:
            # BROKEN: "the step failed": the tool is called again with it
            self.stopping.wait(next(delay))


def install() -> None:
    worker_module.Worker._run_tool = _run_tool  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
