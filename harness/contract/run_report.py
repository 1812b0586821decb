"""What the harness gives an engine (RunInput) and reads back from it (RunReport).

Both are part of the engine contract (harness/CONTRACT.md); `crashcert schema` prints
their JSON schema. The harness validates every report; a malformed one is an ERROR.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from harness.scenario import schema as scenario_module


class ReportModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class RunInput(pydantic.BaseModel):
    """Submitted to an engine: the messages (with the run key embedded), budgets, tools."""

    model_config = pydantic.ConfigDict(extra="forbid")

    run_key: str
    messages: list[dict[str, Any]]
    budgets: scenario_module.Budgets
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
    key: str  # the idempotency key sent to the tool service
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
    status: scenario_module.RunStatus
    reason: str | None = None
    attempts: int = 0
    frontier: FrontierReport
    model_calls: list[ModelCallReport] = pydantic.Field(default_factory=list)
    tool_calls: list[ToolCallReport] = pydantic.Field(default_factory=list)
    budget: dict[str, BudgetUse] = pydantic.Field(default_factory=dict)
    delivery: DeliveryReport

    @property
    def terminal(self) -> bool:
        return self.status in scenario_module.TERMINAL_STATUSES
