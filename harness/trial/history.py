"""One append-only record per trial: boundary hits, faults, workers, world ledgers, report.

A TrialHistory is all the checkers see. It is written to the trial directory as JSON
lines (history.jsonl) and read back by `crashcert analyze` to re-check offline.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from harness.contract import run_report
from harness.scenario import schema as scenario_module
from harness.world import ledger


class Record(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    seq: int = 0
    t: float = 0.0


FaultAction = Literal[
    "kill",  # SIGKILL the worker's process group while it is held at the point
    "pause",  # SIGSTOP the worker past its lease, SIGCONT later
    "db_cut",  # disable the worker's Toxiproxy proxy, heal later
    "commit_lost",  # at a before_commit point: drop the server->engine direction
    "commit_dropped",  # at a before_commit point: drop the engine->server direction
    "latency",  # latency larger than the lease on the worker's connection
    "pg_restart",  # pg_ctl stop -m immediate, then start again
]


class FaultStep(pydantic.BaseModel):
    """Apply `action` when the engine reports `point` for the `occurrence`-th time."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    action: FaultAction = "kill"
    point: str
    occurrence: int = pydantic.Field(default=1, ge=1)
    params: dict[str, Any] = pydantic.Field(default_factory=dict)

    def label(self) -> str:
        """`kill@run.claimed#1`, with `?name=value&...` when the step has params."""
        text = f"{self.action}@{self.point}#{self.occurrence}"
        if self.params:
            text += "?" + "&".join(
                f"{name}={_param_text(value)}" for name, value in sorted(self.params.items())
            )
        return text


def _param_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class BoundaryHit(Record):
    kind: Literal["boundary"] = "boundary"
    point: str  # e.g. "tools.pending" or "tools.pending:before_commit"
    occurrence: int  # 1-based count of this point within the trial
    run_id: str | None
    worker_id: str | None
    pid: int | None
    detail: dict[str, Any] = pydantic.Field(default_factory=dict)


class FaultApplied(Record):
    kind: Literal["fault"] = "fault"
    action: str  # a FaultAction, or "heal" / "resume" / "pg_start" for the end of one
    step: str | None = None  # FaultStep.label() that caused it
    worker_id: str | None = None
    pid: int | None = None
    ok: bool = True
    note: str = ""
    # What the harness read straight from the engine's committed state at this moment,
    # e.g. {"frontier_version": 5, "status": "running"}: how a lost commit really ended.
    observed: dict[str, Any] = pydantic.Field(default_factory=dict)


class WorkerEvent(Record):
    kind: Literal["worker"] = "worker"
    # "crashed": the worker died on its own (no fault killed it, the trial had not ended)
    # with a non-zero exit status; the harness replaced it, as a supervisor would.
    event: Literal["started", "exited", "crashed"]
    worker_id: str
    pid: int
    returncode: int | None = None
    log: str | None = None  # a crashed worker's log, relative to the trial directory
    log_tail: list[str] = pydantic.Field(default_factory=list)  # its last lines


Event = BoundaryHit | FaultApplied | WorkerEvent


class TrialHistory(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    trial_id: str
    engine: str
    scenario: scenario_module.Scenario
    plan: list[FaultStep] = pydantic.Field(default_factory=list)
    seed: int = 0
    # The points the engine's description says it reports, even when this trial ran it as
    # a black box (no control channel); None: not recorded (a history from before).
    declared_boundaries: list[str] | None = None
    run_key: str
    run_id: str | None = None
    events: list[BoundaryHit | FaultApplied | WorkerEvent] = pydantic.Field(default_factory=list)
    model: list[ledger.ModelRequest] = pydantic.Field(default_factory=list)
    tools: list[ledger.ToolRequest | ledger.ToolEffect | ledger.ToolQuery] = pydantic.Field(
        default_factory=list
    )
    sink: list[ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery] = pydantic.Field(
        default_factory=list
    )
    # Snapshots of the run report taken by the harness over time (last one is final).
    reports: list[run_report.RunReport] = pydantic.Field(default_factory=list)
    # Engine-specific durable state read straight from Postgres (reference engine only).
    engine_tables: dict[str, list[dict[str, Any]]] | None = None
    started_at: float = 0.0
    workers_started_at: float | None = None  # when the first workers had been started
    healed_at: float | None = None  # when the last fault healed (None: no fault)
    finished_at: float | None = None  # when the run was first seen terminal
    ended_at: float = 0.0
    harness_error: str | None = None  # the environment or harness broke: verdict ERROR
    interrupted: str | None = None  # the user stopped it first: proves nothing, INCONCLUSIVE

    @property
    def final_report(self) -> run_report.RunReport | None:
        return self.reports[-1] if self.reports else None

    def boundary_hits(self) -> list[BoundaryHit]:
        return [event for event in self.events if isinstance(event, BoundaryHit)]

    def faults(self) -> list[FaultApplied]:
        return [event for event in self.events if isinstance(event, FaultApplied)]
