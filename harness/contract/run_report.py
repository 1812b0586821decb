"""What the harness gives an engine (RunInput) and reads back from it (RunReport).

Both are part of the engine contract (harness/CONTRACT.md), with the types a scenario
shares with them (Budgets, RunStatus); `crashcert schema` prints their JSON schema. The
harness validates every report; a malformed one is an ERROR.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

# Budgets of one run: bounded so the engine can store what it is given, and large enough
# that production budgets of millions of tokens replay (`crashcert incident`).
MAX_BUDGET = 10**6  # model calls and tool calls of one run
MAX_TOKEN_BUDGET = 10**9
TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "cancelled", "dead_lettered", "delivery_uncertain", "budget_exhausted"}
)
RunStatus = Literal[
    "pending",
    "running",
    "waiting",
    "succeeded",
    "failed",
    "cancelled",
    "dead_lettered",
    "delivery_uncertain",
    "budget_exhausted",
]


class Budgets(pydantic.BaseModel):
    """A run's budgets: written in a scenario, handed to the engine with the run."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    iterations: int = pydantic.Field(default=8, ge=1, le=MAX_BUDGET)
    tool_calls: int = pydantic.Field(default=8, ge=0, le=MAX_BUDGET)
    tokens: int = pydantic.Field(default=100_000, ge=1, le=MAX_TOKEN_BUDGET)


class ReportModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class RunInput(pydantic.BaseModel):
    """Submitted to an engine: the messages (with the run key embedded), budgets, tools."""

    model_config = pydantic.ConfigDict(extra="forbid")

    run_key: str
    messages: list[dict[str, Any]]
    budgets: Budgets
    max_attempts: int = 5


class BudgetUse(ReportModel):
    used: int
    limit: int


class ModelCallReport(ReportModel):
    turn: int
    state: Literal["pending", "recorded", "interrupted", "failed"]
    usage: dict[str, int] | None = None


class ToolCallReport(ReportModel):
    id: str  # the model's tool_call id
    name: str
    # The idempotency key sent to the tool service; None (or absent) when the engine sends
    # none, which tool.same_key names as such rather than as a key "".
    key: str | None = None
    state: Literal[
        "reserved",
        "awaiting_approval",
        "started",
        "succeeded",
        "failed",
        "outcome_unknown",
        "rejected",
        "cancelled",
    ]
    turn: int


class DeliveryReport(ReportModel):
    state: Literal["none", "pending", "sending", "delivered", "uncertain"]
    key: str | None = None


class FrontierReport(ReportModel):
    phase: Literal["model_pending", "tools_pending", "model_ready", "reply_ready"] | None
    version: int


class RunReport(ReportModel):
    v: int = 1
    run_id: str
    status: RunStatus
    reason: str | None = None
    attempts: int = 0
    frontier: FrontierReport
    model_calls: list[ModelCallReport] = pydantic.Field(default_factory=list)
    tool_calls: list[ToolCallReport] = pydantic.Field(default_factory=list)
    budget: dict[str, BudgetUse] = pydantic.Field(default_factory=dict)
    delivery: DeliveryReport

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES
