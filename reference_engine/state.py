"""Plain values for a run's durable state as the worker loads it (no I/O here)."""

from __future__ import annotations

import dataclasses
from typing import Any

TERMINAL = frozenset(
    {"succeeded", "failed", "cancelled", "dead_lettered", "delivery_uncertain", "budget_exhausted"}
)
SETTLED_TOOL_STATES = frozenset({"succeeded", "failed", "outcome_unknown", "rejected", "cancelled"})


@dataclasses.dataclass(frozen=True)
class ModelCall:
    id: str
    turn: int
    attempt: int
    lease_epoch: int
    state: str
    usage: dict[str, int] | None = None


@dataclasses.dataclass(frozen=True)
class ToolCall:
    id: str  # the COMMAND_ID
    turn: int
    position: int
    tool_call_id: str
    name: str
    arguments: str
    key: str
    declaration: dict[str, Any] | None
    state: str
    approval: str | None = None
    outcome: dict[str, Any] | None = None
    started_epoch: int | None = None
    attempts: int = 0

    @property
    def settled(self) -> bool:
        return self.state in SETTLED_TOOL_STATES


@dataclasses.dataclass(frozen=True)
class Delivery:
    key: str
    state: str
    attempts: int


@dataclasses.dataclass(frozen=True)
class Budget:
    iterations: int
    tool_calls: int
    tokens: int
    iterations_used: int = 0
    tool_calls_used: int = 0
    tokens_used: int = 0
    charged: frozenset[tuple[str, str]] = frozenset()  # (kind, ref) already billed


@dataclasses.dataclass(frozen=True)
class RunState:
    run_id: str
    status: str
    lease_owner: str | None
    lease_epoch: int
    cancel_requested: bool
    attempts: int
    max_attempts: int
    frontier_version: int
    phase: str
    checkpoint: Any  # the raw payload; decide validates it
    checkpoint_version: int
    budget: Budget
    model_calls: tuple[ModelCall, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    delivery: Delivery | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class Known:
    """What this worker process knows that is not durable (yet)."""

    worker_id: str
    lease_epoch: int
    model_results: frozenset[str] = frozenset()  # model call ids with a response in memory
    tool_results: frozenset[str] = frozenset()  # command ids with an outcome in memory
    tools_sent: frozenset[str] = frozenset()  # command ids POSTed under this lease epoch
    reply_acked: bool = False  # the sink acknowledged our POST
