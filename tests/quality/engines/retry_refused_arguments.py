"""Broken variant of the reference engine: a tool call re-driven after a crash runs as a
durable unit that takes every error for its own failure. The tool's refusal of the model's
bad arguments (a 4xx validation error, the same however often it is sent) gives the run
back to be retried, instead of settling the call `failed` and telling the model, so each
attempt sends the same bad arguments again until the attempts are used up; the model is
never asked to correct them (pydantic/pydantic-ai#6979: a durable dynamic tool's schema
`ValidationError` retried by Temporal and DBOS until the workflow failed). A call run
outside recovery is handled as the reference engine handles it.

    python tests/quality/engines/retry_refused_arguments.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, errors, leases, services
from reference_engine import state as state_module
from reference_engine import worker as worker_module

FAILED = "failed"
_recover_tool = worker_module.Worker._recover_tool


def recover_tool(
    self: worker_module.Worker,
    lease: leases.Lease,
    call: state_module.ToolCall,
    memo: worker_module.Memo,
) -> None:
    run_tool = self.services.run_tool

    def durable_unit(
        name: str, arguments: str, key: str, declaration: dict[str, Any]
    ) -> services.ToolResult:
        result = run_tool(name, arguments, key, declaration)
        if result.state == FAILED:
            # BROKEN: the refusal is taken for a failure of the unit, retried by the engine
            raise errors.ServiceUnavailable(f"tool unit {name} failed: {result.outcome}")
        return result

    self.services.run_tool = durable_unit  # type: ignore[method-assign]
    try:
        _recover_tool(self, lease, call, memo)
    finally:
        del self.services.run_tool


def install() -> None:
    worker_module.Worker._recover_tool = recover_tool  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
