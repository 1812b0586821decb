"""One append-only record per trial: boundary hits, faults, workers, world ledgers, report.

A TrialHistory is all the checkers see. It is written to the trial directory as JSON
lines (history.jsonl) and read back by `crashcert analyze` to re-check offline.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from harness.contract import boundaries, run_report
from harness.faults import spec
from harness.scenario import schema
from harness.world import ledger


class Record(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    seq: int = 0
    t: float = 0.0


class BoundaryHit(Record):
    kind: Literal["boundary"] = "boundary"
    point: str  # e.g. "tools.pending" or "tools.pending:before_commit"
    occurrence: int  # 1-based count of this point within the trial
    run_id: str | None
    worker_id: str | None
    pid: int | None
    detail: dict[str, Any] = pydantic.Field(default_factory=dict)
    # A black box's world hit: the boundary it stands for, recorded with it by the world
    # trigger (boundaries.STANDS_FOR, harness/CONTRACT.md section 6), e.g. `tool.returned`
    # for `world:tool.effect`. None for the engine's own hits and for time points.
    stands_for: str | None = None

    @pydantic.model_validator(mode="before")
    @classmethod
    def _world_meaning(cls, data: Any) -> Any:
        """A world hit recorded before hits carried what they stand for is read once, here."""
        if isinstance(data, dict) and data.get("stands_for") is None:
            meaning = boundaries.STANDS_FOR.get(data.get("point", ""))
            if meaning is not None:
                data = {**data, "stands_for": meaning}
        return data

    @pydantic.model_serializer(mode="wrap")
    def _without_none(self, handler: pydantic.SerializerFunctionWrapHandler) -> Any:
        """The engine's own hits are written as they always were: no `stands_for: null`."""
        data = handler(self)
        if isinstance(data, dict) and data.get("stands_for") is None:
            data.pop("stands_for", None)
        return data


class FaultApplied(Record):
    kind: Literal["fault"] = "fault"
    action: str  # a fault class (spec.CATALOG), or the record that ends one (spec.ENDINGS)
    step: str | None = None  # the label of `planned`, as histories have always carried it
    # The plan's step that caused it, and the hit it struck at, as recorded (a world hit
    # keeps its world point). Filled from `step` for older histories.
    planned: spec.FaultStep | None = None
    struck_at: spec.PointRef | None = None
    worker_id: str | None = None
    pid: int | None = None
    ok: bool = True
    note: str = ""
    # What the harness read straight from the engine's committed state at this moment,
    # e.g. {"frontier_version": 5, "status": "running"}: how a lost commit really ended.
    observed: dict[str, Any] = pydantic.Field(default_factory=dict)

    @pydantic.model_validator(mode="before")
    @classmethod
    def _structured(cls, data: Any) -> Any:
        """The label and the structured step say the same, whichever was given: a history
        written before the structured fields existed is read once, here. Such a fault
        struck at the point its step names."""
        if not isinstance(data, dict):
            return data
        planned, label = data.get("planned"), data.get("step")
        if planned is None and isinstance(label, str):
            step = spec.read_label(label)
            if step is not None:
                data = {**data, "planned": step}
                if data.get("struck_at") is None:
                    data["struck_at"] = spec.PointRef(point=step.point, occurrence=step.occurrence)
        elif planned is not None and label is None:
            try:
                step = spec.FaultStep.model_validate(planned)
            except pydantic.ValidationError:
                return data  # the field's own validation says what is wrong
            data = {**data, "step": step.label()}
        return data


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


class ActionTaken(Record):
    """The harness approved, rejected, cancelled, purged or reused a key from outside (a
    scenario's `actions`)."""

    kind: Literal["action"] = "action"
    do: str
    call: str | None = None
    at: str
    # The sequence clock just before the command was sent: anything the world recorded
    # before it cannot be the action's doing.
    requested_seq: int = 0
    ok: bool = True
    note: str = ""
    # reuse_key: the run the new request's submit answered, and the run key the world
    # knows that request by (its marker; the engine was given the purged run's key).
    run_id: str | None = None
    world_key: str | None = None


Event = BoundaryHit | FaultApplied | WorkerEvent | ActionTaken


class TrialHistory(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    trial_id: str
    engine: str
    scenario: schema.Scenario
    plan: list[spec.FaultStep] = pydantic.Field(default_factory=list)
    seed: int = 0
    # The points the engine's description says it reports, even when this trial ran it as
    # a black box (no control channel); None: not recorded (a history from before).
    declared_boundaries: list[str] | None = None
    run_key: str
    run_id: str | None = None
    events: list[Event] = pydantic.Field(default_factory=list)
    model: list[ledger.ModelRequest] = pydantic.Field(default_factory=list)
    tools: list[ledger.ToolEntry] = pydantic.Field(default_factory=list)
    sink: list[ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery] = pydantic.Field(
        default_factory=list
    )
    # Requests the world refused for want of the trial's secret: never the engine's.
    foreign: list[ledger.ForeignRequest] = pydantic.Field(default_factory=list)
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
    # What held the workers' processes (a cgroup, or the sweep and why) and how many they
    # left for teardown to kill (harness/lab/containment.py); None: no worker, or older.
    containment: str | None = None
    # A campaign keeps a passed trial's history light in memory (light()): its events and
    # ledgers are on disk (history.jsonl) and its own page is written. Never stored.
    light: bool = pydantic.Field(default=False, exclude=True)

    def lightened(self) -> TrialHistory:
        """This history without what only its own page and a re-analysis read: the first
        boundary hit (trial latency), the final report and the timings stay, so a campaign's
        memory is flat in its number of trials (~0.3 MB per whole history)."""
        return self.model_copy(
            update={
                "events": self.boundary_hits()[:1],
                "model": [],
                "tools": [],
                "sink": [],
                "reports": self.reports[-1:],
                "engine_tables": None,
                "light": True,
            }
        )

    @property
    def final_report(self) -> run_report.RunReport | None:
        return self.reports[-1] if self.reports else None

    def boundary_hits(self) -> list[BoundaryHit]:
        return [event for event in self.events if isinstance(event, BoundaryHit)]

    def faults(self) -> list[FaultApplied]:
        return [event for event in self.events if isinstance(event, FaultApplied)]

    def actions(self) -> list[ActionTaken]:
        return [event for event in self.events if isinstance(event, ActionTaken)]
