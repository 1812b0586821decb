"""Literal trial histories for checker tests: a refund scenario and a step-by-step builder.

`Trial` plays an engine and the world on one fake clock (seq and t grow by one per
record), so a test reads like the trial it describes:

    trial = builders.Trial()
    trial.claim("w-1")
    trial.model_turn(0)
    ...
    history = trial.build()
"""

from __future__ import annotations

import json
from typing import Any

from harness.contract import run_report
from harness.faults import spec as fault_spec
from harness.record import history as history_module
from harness.scenario import schema
from harness.world import ledger, model

RUN_KEY = "rk-7"
RUN_ID = "run-1"
ORDER = f"ord-{RUN_KEY}"
LOOKUP_RESULT = {"order_id": "ord-1", "amount_cents": 4999, "refundable": True}
REFUND_RESULT = {"refund_id": "rf-1", "status": "refunded"}
REPLY = f"Your order {ORDER} has been refunded."
USAGE = [(220, 18), (300, 25), (380, 30)]  # (prompt, completion) per turn
TICK = 0.1  # seconds between two records on the fake clock


def refund_scenario(
    *,
    sink_queryable: bool = True,
    refund_queryable: bool = True,
    refund_honours_key: bool = False,
    expect: str = "succeeded",
    deadline_s: float = 20.0,
    lookup_redeployed: bool = False,
    iterations: int = 6,
) -> schema.Scenario:
    # lookup_redeployed: the lookup service is redeployed (version 2) after its first request
    redeploy = {"redeploy": {"version": "2"}} if lookup_redeployed else {}
    return schema.parse(
        {
            "name": "refund",
            "input": {"user": "Order ord-{run} arrived broken. Please refund it."},
            "budgets": {"iterations": iterations, "tool_calls": 4, "tokens": 5000},
            "tools": [
                {
                    "name": "lookup_order",
                    "replay": "replayable",
                    "effect": "read",
                    "behaviour": {"result": LOOKUP_RESULT},
                    **redeploy,
                },
                {
                    "name": "refund_order",
                    "replay": "non_replayable",
                    "effect": "write",
                    "queryable": refund_queryable,
                    "honours_idempotency_key": refund_honours_key,
                    "behaviour": {"result": REFUND_RESULT},
                },
            ],
            "turns": [
                {
                    "tool_calls": [
                        {
                            "id": "call_lookup",
                            "name": "lookup_order",
                            "arguments": {"order_id": "ord-{run}"},
                        }
                    ],
                    "usage": {"prompt_tokens": USAGE[0][0], "completion_tokens": USAGE[0][1]},
                },
                {
                    "tool_calls": [
                        {
                            "id": "call_refund",
                            "name": "refund_order",
                            "arguments": {"order_id": "ord-{run}", "amount_cents": 4999},
                        }
                    ],
                    "usage": {"prompt_tokens": USAGE[1][0], "completion_tokens": USAGE[1][1]},
                },
                {
                    "content": "Your order ord-{run} has been refunded.",
                    "usage": {"prompt_tokens": USAGE[2][0], "completion_tokens": USAGE[2][1]},
                },
            ],
            "sink": {"queryable": sink_queryable},
            "deadline_s": deadline_s,
            "expect": {"status": expect},
        }
    )


REMINDER = {"channel": "#standup-{run}", "text": "Stand-up starts in 5 minutes."}
POSTED = {"posted": True}


def reminder_scenario(*, same_turn: bool = False) -> schema.Scenario:
    """scenarios/repeat_reminder.yaml in small: one reminder posted twice, equal arguments.

    `call_remind` in turn 0 and `call_nudge` in turn 1 (both in turn 0 with `same_turn`),
    to a non-replayable tool that cannot be queried and honours no key.
    """
    remind = {"id": "call_remind", "name": "post_message", "arguments": REMINDER}
    nudge = {"id": "call_nudge", "name": "post_message", "arguments": REMINDER}
    tool_turns = [[remind, nudge]] if same_turn else [[remind], [nudge]]
    turns: list[dict[str, Any]] = [
        {"tool_calls": calls, "usage": {"prompt_tokens": 150 + 50 * i, "completion_tokens": 30}}
        for i, calls in enumerate(tool_turns)
    ]
    turns.append({"content": "I posted the reminder twice.", "usage": {"prompt_tokens": 300}})
    return schema.parse(
        {
            "name": "repeat_reminder",
            "input": {"user": "Remind #standup-{run} about stand-up, then nudge them again."},
            "budgets": {"iterations": 5, "tool_calls": 4, "tokens": 4000},
            "tools": [
                {
                    "name": "post_message",
                    "replay": "non_replayable",
                    "effect": "write",
                    "behaviour": {"result": POSTED},
                }
            ],
            "turns": turns,
            "sink": {"queryable": True},
        }
    )


def ok(result: Any) -> dict[str, Any]:
    return {"status": "ok", "result": result}


UNKNOWN: dict[str, Any] = {"status": "outcome_unknown", "note": "The action may have happened."}


class Trial:
    """Builds a TrialHistory record by record; the high-level steps play a correct engine."""

    def __init__(self, scenario: schema.Scenario | None = None) -> None:
        self.scenario = scenario or refund_scenario()
        self.clock = 0
        self.events: list[
            history_module.BoundaryHit | history_module.FaultApplied | history_module.WorkerEvent
        ] = []
        self.model: list[ledger.ModelRequest] = []
        self.tools: list[ledger.ToolEntry] = []
        self.sink: list[ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery] = []
        self.reports: list[run_report.RunReport] = []
        self.occurrences: dict[str, int] = {}
        self.worker = "w-1"
        self.version = 0
        self.phase: str = "model_ready"
        # What the engine has durably recorded, for the report.
        self.iterations = 0
        self.recorded: list[run_report.ModelCallReport] = []
        self.tool_states: dict[str, str] = {}
        self.answers: dict[str, dict[str, Any]] = {}  # tool messages the engine will send
        self.engine_tables: dict[str, list[dict[str, Any]]] | None = None
        self.harness_error: str | None = None
        self.healed_at: float | None = None
        self.finished_at: float | None = None

    # --- low level ------------------------------------------------------------------

    def tick(self) -> tuple[int, float]:
        self.clock += 1
        return self.clock, self.now

    @property
    def now(self) -> float:
        return round(self.clock * TICK, 6)

    def hit(
        self, point: str, *, worker: str | None = None, **detail: Any
    ) -> history_module.BoundaryHit:
        self.occurrences[point] = self.occurrences.get(point, 0) + 1
        seq, t = self.tick()
        if not point.endswith(":before_commit") and "frontier_version" not in detail:
            detail = {"frontier_version": self.version, "phase": self.phase, **detail}
        hit = history_module.BoundaryHit(
            seq=seq,
            t=t,
            point=point,
            occurrence=self.occurrences[point],
            run_id=RUN_ID,
            worker_id=worker or self.worker,
            pid=100,
            detail={key: value for key, value in detail.items() if value is not None},
        )
        self.events.append(hit)
        return hit

    def checkpoint(
        self, point: str, phase: str | None, **detail: Any
    ) -> history_module.BoundaryHit:
        """`point:before_commit`, the commit (a new frontier version with a phase), `point`."""
        self.hit(f"{point}:before_commit", **detail)
        if phase is not None:
            self.version += 1
            self.phase = phase
        return self.hit(point, **detail)

    def fault(
        self,
        action: str,
        at: history_module.BoundaryHit | None = None,
        *,
        worker: str | None = None,
        ok: bool = True,
        observed: dict[str, Any] | None = None,
    ) -> history_module.FaultApplied:
        seq, t = self.tick()
        # As the nemesis records it: the step and the hit it struck at (the label follows).
        planned = struck_at = None
        if at is not None:
            planned = fault_spec.FaultStep(action=action, point=at.point, occurrence=at.occurrence)
            struck_at = fault_spec.PointRef(point=at.point, occurrence=at.occurrence)
        fault = history_module.FaultApplied(
            seq=seq,
            t=t,
            action=action,
            planned=planned,
            struck_at=struck_at,
            worker_id=worker or (at.worker_id if at else None),
            ok=ok,
            observed=observed or {},
        )
        self.events.append(fault)
        return fault

    def heal(
        self, fault: history_module.FaultApplied, *, observed: dict[str, Any] | None = None
    ) -> history_module.FaultApplied:
        """The nemesis's heal record for `fault`: same step, hit and worker."""
        seq, t = self.tick()
        heal = history_module.FaultApplied(
            seq=seq,
            t=t,
            action="heal",
            planned=fault.planned,
            struck_at=fault.struck_at,
            worker_id=fault.worker_id,
            ok=True,
            observed=observed or {},
        )
        self.events.append(heal)
        return heal

    def last_hit(self) -> history_module.BoundaryHit:
        return next(e for e in reversed(self.events) if isinstance(e, history_module.BoundaryHit))

    def worker_event(self, event: str, worker: str) -> None:
        seq, t = self.tick()
        self.events.append(
            history_module.WorkerEvent.model_validate(
                {"seq": seq, "t": t, "event": event, "worker_id": worker, "pid": 100}
            )
        )

    def messages(self, turn: int) -> list[dict[str, Any]]:
        """The transcript of a correct engine asking for `turn`."""
        user = schema.substitute_run_key(self.scenario.input.user, RUN_KEY)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.scenario.input.system},
            {"role": "user", "content": f"{user}\n[crashcert-run: {RUN_KEY}]"},
        ]
        for earlier in self.scenario.turns[:turn]:
            messages.append(self.assistant(earlier))
            for call in earlier.tool_calls:
                content = self.answers.get(call.id, {"status": "error", "error": "missing"})
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(content)}
                )
        return messages

    def assistant(self, turn: schema.Turn) -> dict[str, Any]:
        return model.assistant_message(turn, RUN_KEY)

    def model_request(
        self,
        turn: int,
        *,
        status: int = 200,
        messages: list[dict[str, Any]] | None = None,
        problems: list[str] | None = None,
        error: str | None = None,
    ) -> ledger.ModelRequest:
        seq, t = self.tick()
        scripted = self.scenario.turns[turn] if turn < len(self.scenario.turns) else None
        answered = status == 200 and scripted is not None
        usage = None
        if answered and scripted is not None:
            usage = {
                "prompt_tokens": scripted.usage.prompt_tokens,
                "completion_tokens": scripted.usage.completion_tokens,
                "total_tokens": scripted.usage.total_tokens,
            }
        entry = ledger.ModelRequest(
            seq=seq,
            t=t,
            run_key=RUN_KEY,
            turn=turn,
            messages=messages if messages is not None else self.messages(turn),
            status_code=status,
            response=self.assistant(scripted) if answered and scripted is not None else None,
            usage=usage,
            problems=problems or [],
            error=error,
        )
        self.model.append(entry)
        return entry

    def tool_request(
        self,
        call_id: str,
        *,
        key: str | None = "default",
        outcome: str = "ok",
        effect: bool | None = None,
        arguments: Any = None,
    ) -> ledger.ToolRequest:
        call = self.scripted_call(call_id)
        spec = self.scenario.tool(call.name)
        seq, t = self.tick()
        request = ledger.ToolRequest(
            seq=seq,
            t=t,
            tool=call.name,
            key=f"key-{call_id}" if key == "default" else key,
            arguments=arguments
            if arguments is not None
            else schema.substitute_run_key(call.arguments, RUN_KEY),
            status_code={"ok": 200, "deduplicated": 200, "effect_then_failed": 500}.get(
                outcome, 503
            ),
            outcome=outcome,
            result=spec.behaviour.result
            if outcome in ("ok", "deduplicated", "effect_then_failed")
            else None,
        )
        self.tools.append(request)
        if effect is None:
            effect = outcome in ("ok", "effect_then_failed")
        if effect:
            seq, t = self.tick()
            self.tools.append(
                ledger.ToolEffect(
                    seq=seq,
                    t=t,
                    tool=request.tool,
                    key=request.key,
                    arguments=request.arguments,
                    request_seq=request.seq,
                )
            )
        return request

    def redeploy(self, after: ledger.ToolRequest) -> ledger.ToolRedeploy:
        """The world redeploys the tool of `after` (scenario `redeploy`) once it arrived."""
        new = self.scenario.tool(after.tool).redeployed()
        seq, t = self.tick()
        entry = ledger.ToolRedeploy(
            seq=seq,
            t=t,
            tool=after.tool,
            version=new.version,
            fingerprint=new.fingerprint,
            after_request_seq=after.seq,
        )
        self.tools.append(entry)
        return entry

    def tool_query(self, call_id: str, *, found: bool, key: str | None = None) -> ledger.ToolQuery:
        call = self.scripted_call(call_id)
        seq, t = self.tick()
        query = ledger.ToolQuery(
            seq=seq, t=t, tool=call.name, key=key or f"key-{call_id}", found=found
        )
        self.tools.append(query)
        return query

    def delivery(
        self, *, content: str | None = None, key: str = "reply-run-1", run_id: str | None = RUN_ID
    ) -> ledger.ReplyDelivery:
        scripted = schema.substitute_run_key(self.scenario.final_reply or "", RUN_KEY)
        text = scripted if content is None else content
        seq, t = self.tick()
        request = ledger.ReplyRequest(
            seq=seq, t=t, key=key, run_id=run_id, content=text, status_code=200, outcome="delivered"
        )
        seq, t = self.tick()
        delivered = ledger.ReplyDelivery(
            seq=seq, t=t, key=key, run_id=run_id, content=text, request_seq=request.seq
        )
        self.sink.extend([request, delivered])
        return delivered

    def reply_query(self, *, key: str = "reply-run-1") -> ledger.ReplyQuery:
        """GET /replies/{key}: 405 when the sink cannot be asked, else found or not."""
        seq, t = self.tick()
        if not self.scenario.sink.queryable:
            query = ledger.ReplyQuery(seq=seq, t=t, key=key, found=False, status_code=405)
        else:
            found = any(entry.key == key for entry in self.sink if entry.kind == "reply.delivery")
            query = ledger.ReplyQuery(
                seq=seq, t=t, key=key, found=found, status_code=200 if found else 404
            )
        self.sink.append(query)
        return query

    def scripted_call(self, call_id: str) -> schema.ScriptedToolCall:
        for turn in self.scenario.turns:
            for call in turn.tool_calls:
                if call.id == call_id:
                    return call
        raise KeyError(call_id)

    # --- a correct engine, step by step ------------------------------------------------

    def claim(self, worker: str) -> history_module.BoundaryHit:
        self.worker = worker
        return self.hit("run.claimed")

    def model_call(self, turn: int) -> ledger.ModelRequest:
        """model.pending (a new iteration), the request, model.returned."""
        self.checkpoint("model.pending", "model_pending", turn=turn)
        self.iterations += 1
        request = self.model_request(turn)
        self.hit("model.returned", turn=turn)
        return request

    def decide(self, turn: int) -> history_module.BoundaryHit:
        """The decision of `turn` committed: tools.pending or reply.ready."""
        scripted = self.scenario.turns[turn]
        usage = {
            "prompt_tokens": scripted.usage.prompt_tokens,
            "completion_tokens": scripted.usage.completion_tokens,
            "total_tokens": scripted.usage.total_tokens,
        }
        self.recorded.append(run_report.ModelCallReport(turn=turn, state="recorded", usage=usage))
        for call in scripted.tool_calls:
            self.tool_states[call.id] = "reserved"
        if scripted.tool_calls:
            return self.checkpoint("tools.pending", "tools_pending", turn=turn)
        return self.checkpoint("reply.ready", "reply_ready", turn=turn)

    def model_turn(self, turn: int) -> history_module.BoundaryHit:
        self.model_call(turn)
        return self.decide(turn)

    def start_tool(self, call_id: str) -> history_module.BoundaryHit:
        self.tool_states[call_id] = "started"
        return self.checkpoint("tool.started", None, tool_call_id=call_id)

    def finish_tool(
        self, call_id: str, *, key: str | None = "default"
    ) -> history_module.BoundaryHit:
        """The request (answered ok), tool.returned, tool.settled."""
        request = self.tool_request(call_id, key=key)
        returned = self.hit("tool.returned", tool_call_id=call_id)
        self.settle(call_id, "succeeded", ok(request.result))
        return returned

    def settle(self, call_id: str, state: str, answer: dict[str, Any]) -> None:
        self.tool_states[call_id] = state
        self.answers[call_id] = answer
        self.checkpoint("tool.settled", None, tool_call_id=call_id)

    def run_tool(self, call_id: str) -> None:
        self.start_tool(call_id)
        self.finish_tool(call_id)

    def close_round(self) -> history_module.BoundaryHit:
        return self.checkpoint("model.ready", "model_ready")

    def deliver(self) -> None:
        self.checkpoint("reply.sending", None)
        self.delivery()
        self.hit("reply.sent")

    def finish(self, status: str = "succeeded") -> None:
        self.checkpoint("run.finished", None)
        self.report(status)
        self.finished_at = self.now

    def report(self, status: str = "succeeded", **overrides: Any) -> run_report.RunReport:
        tokens = sum((call.usage or {}).get("total_tokens", 0) for call in self.recorded)
        budgets = self.scenario.budgets
        started = [cid for cid, state in self.tool_states.items() if state != "reserved"]
        fields: dict[str, Any] = {
            "run_id": RUN_ID,
            "status": status,
            "attempts": 1,
            "frontier": {"phase": self.phase, "version": self.version},
            "model_calls": [call.model_dump() for call in self.recorded],
            "tool_calls": [
                {
                    "id": cid,
                    "name": self.scripted_call(cid).name,
                    "key": f"key-{cid}",
                    "state": state,
                    "turn": self.turn_of(cid),
                }
                for cid, state in self.tool_states.items()
            ],
            "budget": {
                "iterations": {"used": self.iterations, "limit": budgets.iterations},
                "tool_calls": {"used": len(started), "limit": budgets.tool_calls},
                "tokens": {"used": tokens, "limit": budgets.tokens},
            },
            "delivery": {"state": "delivered" if self.sink else "none"},
        }
        fields.update(overrides)
        report = run_report.RunReport.model_validate(fields)
        self.reports.append(report)
        return report

    def clean_report(self) -> Trial:
        """Report the run succeeded, as a correct engine would now (for chaining)."""
        self.report("succeeded")
        return self

    def turn_of(self, call_id: str) -> int:
        for index, turn in enumerate(self.scenario.turns):
            if any(call.id == call_id for call in turn.tool_calls):
                return index
        raise KeyError(call_id)

    def build(self) -> history_module.TrialHistory:
        return history_module.TrialHistory(
            trial_id="t-1",
            engine="test",
            scenario=self.scenario,
            run_key=RUN_KEY,
            run_id=RUN_ID,
            events=self.events,
            model=self.model,
            tools=self.tools,
            sink=self.sink,
            reports=self.reports,
            engine_tables=self.engine_tables,
            started_at=0.0,
            healed_at=self.healed_at,
            finished_at=self.finished_at,
            ended_at=self.now + TICK,
            harness_error=self.harness_error,
        )


def clean_trial(scenario: schema.Scenario | None = None) -> Trial:
    """One worker runs the refund scenario start to end without a fault."""
    trial = Trial(scenario)
    trial.claim("w-1")
    trial.model_turn(0)
    trial.run_tool("call_lookup")
    trial.close_round()
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    trial.model_turn(2)
    trial.deliver()
    trial.finish()
    return trial


def reminder_trial(*, same_turn: bool = False) -> Trial:
    """A correct engine posts the reminder twice, each call under its own key."""
    trial = Trial(reminder_scenario(same_turn=same_turn))
    trial.claim("w-1")
    for turn, scripted in enumerate(trial.scenario.turns):
        trial.model_turn(turn)
        for call in scripted.tool_calls:
            trial.run_tool(call.id)
        if scripted.tool_calls:
            trial.close_round()
    trial.deliver()
    trial.finish()
    return trial


def clean() -> history_module.TrialHistory:
    return clean_trial().build()


def without_detail(history: history_module.TrialHistory) -> history_module.TrialHistory:
    """The same history from an engine that puts no detail in its hits."""
    events = [
        event.model_copy(update={"detail": {}})
        if isinstance(event, history_module.BoundaryHit)
        else event
        for event in history.events
    ]
    return history.model_copy(update={"events": events})


def label_only(history: history_module.TrialHistory) -> history_module.TrialHistory:
    """The same history as written before fault records were structured: each fault keeps
    its step label alone, and is read back from JSON as `crashcert analyze` reads it."""
    data = history.model_dump(mode="json")
    for event in data["events"]:
        if event["kind"] == "fault":
            del event["planned"], event["struck_at"]
    return history_module.TrialHistory.model_validate(data)


def evidence(result: Any) -> str:
    """All of a result's evidence as one string, for `in` assertions."""
    return "\n".join(result.evidence)


def first_round(trial: Trial, worker: str = "w-1") -> Trial:
    """Claim, turn 0 and its lookup, round closed: the model is needed for turn 1 next."""
    trial.claim(worker)
    trial.model_turn(0)
    trial.run_tool("call_lookup")
    trial.close_round()
    return trial


def refund_round(trial: Trial) -> Trial:
    """Turn 1 and its refund, round closed."""
    trial.model_turn(1)
    trial.run_tool("call_refund")
    trial.close_round()
    return trial


def last_turn(trial: Trial, status: str = "succeeded") -> Trial:
    """Turn 2, the delivery, the end."""
    trial.model_turn(2)
    trial.deliver()
    trial.finish(status)
    return trial


def kill(trial: Trial, hit: history_module.BoundaryHit) -> None:
    """SIGKILL the worker held at `hit`; the process exits."""
    trial.fault("kill", hit)
    trial.worker_event("exited", hit.worker_id or trial.worker)


def world_hit(
    trial: Trial, point: str, occurrence: int, **detail: object
) -> history_module.BoundaryHit:
    """A hit the world reported (black box): `world:...` or `time:+...`, worker w-1."""
    seq, t = trial.tick()
    hit = history_module.BoundaryHit(
        seq=seq, t=t, point=point, occurrence=occurrence, run_id=None, worker_id="w-1", pid=100,
        detail=dict(detail),
    )  # fmt: skip
    trial.events.append(hit)
    return hit


def black_box_refund_twice(
    *, at: str, action: str = "kill", worker: str | None = "w-1"
) -> history_module.TrialHistory:
    """A black-box engine that starts over after a fault at the refund's world effect
    (`at="world"`) or at a time point: the refund reaches the world twice. `worker` is who
    the fault is recorded against (None: a time kill that struck every worker)."""
    trial = Trial()
    trial.model_request(0)
    trial.tool_request("call_lookup", key="k-lookup-1")
    trial.model_request(1)
    trial.tool_request("call_refund", key="k-refund-1")
    if at == "world":
        effect = trial.tools[-1]
        hit = world_hit(trial, "world:tool.effect", 2, tool="refund_order", ledger_seq=effect.seq)
    else:
        hit = world_hit(trial, "time:+1.00s", 1)
    trial.fault(action, at=hit, worker=worker)
    trial.model_request(0)
    trial.tool_request("call_lookup", key="k-lookup-2")
    trial.model_request(1)
    trial.tool_request("call_refund", key="k-refund-2")
    trial.model_request(2)
    trial.delivery()
    trial.report("succeeded")
    trial.finished_at = trial.now
    return trial.build()
