"""Broken variant of the reference engine: it executes a model response's tool calls as
soon as the response arrives, before the decision is checkpointed, and later serves the
remembered outcomes when the recorded calls are "run". A clean run looks right; a crash
between the execution and the checkpoint calls the model again and executes again.

    python tests/quality/engines/tools_before_checkpoint.py worker
    (see tools_before_checkpoint.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, decide, leases, services
from reference_engine import state as state_module
from reference_engine import worker as worker_module

_call_model = worker_module.Worker._call_model
_run_tool = services.Services.run_tool
# idempotency key -> outcome obtained before the decision was durable (this process only)
_early: dict[str, services.ToolResult] = {}


def call_model(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    call_id: str,
    memo: worker_module.Memo,
) -> None:
    _call_model(self, lease, run, call_id, memo)
    answer, declarations = memo.model_answers[call_id]
    turn = decide.validated(run).turn
    for request in decide.normalise(answer.message).tool_calls:
        # BROKEN: the effect happens now, before tools.pending makes the decision durable
        key = decide.tool_key(run.run_id, turn, request.id)
        declaration = declarations.get(request.name) or {}
        _early[key] = _run_tool(self.services, request.name, request.arguments, key, declaration)


def run_tool(
    self: services.Services, name: str, arguments: str, key: str, declaration: dict[str, Any]
) -> services.ToolResult:
    early = _early.pop(key, None)
    return early if early is not None else _run_tool(self, name, arguments, key, declaration)


def install() -> None:
    worker_module.Worker._call_model = call_model  # type: ignore[method-assign]
    services.Services.run_tool = run_tool  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
