"""The RunReport the `status` command prints (harness/CONTRACT.md section 4), built from
a run's durable state without any I/O."""

from __future__ import annotations

from typing import Any

from reference_engine import state as state_module


def build(run: state_module.RunState) -> dict[str, Any]:
    budget = run.budget
    delivery = run.delivery
    return {
        "v": 1,
        "run_id": run.run_id,
        "status": run.status,
        "reason": run.reason,
        "attempts": run.attempts,
        "frontier": {
            "phase": run.phase if run.phase != "missing" else None,
            "version": run.frontier_version,
        },
        "model_calls": [
            {"turn": call.turn, "state": call.state, "usage": _usage(call.usage)}
            for call in run.model_calls
        ],
        "tool_calls": [
            {
                "id": call.tool_call_id,
                "name": call.name,
                "key": call.key,
                "state": call.state,
                "turn": call.turn,
                "command_id": call.id,
            }
            for call in run.tool_calls
        ],
        "budget": {
            "iterations": {"used": budget.iterations_used, "limit": budget.iterations},
            "tool_calls": {"used": budget.tool_calls_used, "limit": budget.tool_calls},
            "tokens": {"used": budget.tokens_used, "limit": budget.tokens},
        },
        "delivery": {
            "state": delivery.state if delivery else "none",
            "key": delivery.key if delivery else None,
        },
    }


def _usage(usage: dict[str, Any] | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {key: int(value) for key, value in usage.items() if isinstance(value, int)}
