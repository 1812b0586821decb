"""What to do next, given a run's durable state: pure functions, no I/O.

The worker loop is `state = reads.load(run); action = next_action(state, known); execute`.
Everything here is decided from durable state plus the few facts the worker holds in
memory (`state.Known`); recovery after a crash is therefore the ordinary path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from reference_engine import checkpoint as checkpoint_module
from reference_engine import errors
from reference_engine import state as state_module

KEY_PREFIX = "ce-"


# -- actions -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Stop:
    """Nothing for this worker to do (terminal, not ours, parked)."""

    why: str


@dataclasses.dataclass(frozen=True)
class Finish:
    """End the run with a terminal status other than succeeded."""

    status: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Cancel:
    pass


@dataclasses.dataclass(frozen=True)
class OpenModelCall:
    turn: int
    attempt: int
    interrupt: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CallModel:
    call_id: str


@dataclasses.dataclass(frozen=True)
class RecordModel:
    call_id: str


@dataclasses.dataclass(frozen=True)
class StartTool:
    command_id: str
    charge: bool  # reserve one tool_calls budget unit (once per logical call)


@dataclasses.dataclass(frozen=True)
class AwaitApproval:
    command_id: str


@dataclasses.dataclass(frozen=True)
class ExecuteTool:
    """Started under this epoch and never sent: POST it."""

    command_id: str


@dataclasses.dataclass(frozen=True)
class SettleTool:
    """The outcome is in memory: record it."""

    command_id: str


@dataclasses.dataclass(frozen=True)
class RecoverTool:
    """Started, maybe sent, outcome unknown: resolve with the current declaration."""

    command_id: str


@dataclasses.dataclass(frozen=True)
class CloseRound:
    checkpoint: checkpoint_module.Checkpoint


@dataclasses.dataclass(frozen=True)
class SendReply:
    pass


@dataclasses.dataclass(frozen=True)
class QueryReply:
    pass


@dataclasses.dataclass(frozen=True)
class FinishDelivered:
    pass


Action = (
    Stop
    | Finish
    | Cancel
    | OpenModelCall
    | CallModel
    | RecordModel
    | StartTool
    | AwaitApproval
    | ExecuteTool
    | SettleTool
    | RecoverTool
    | CloseRound
    | SendReply
    | QueryReply
    | FinishDelivered
)


# -- keys ----------------------------------------------------------------------------------


def tool_key(run_id: str, turn: int, tool_call_id: str) -> str:
    """Deterministic, so every attempt of one logical call carries the same key."""
    digest = hashlib.sha256(f"{run_id}:{turn}:{tool_call_id}".encode()).hexdigest()
    return KEY_PREFIX + digest


def reply_key(run_id: str) -> str:
    return KEY_PREFIX + "reply-" + hashlib.sha256(f"{run_id}:reply".encode()).hexdigest()


# -- validation ----------------------------------------------------------------------------


def validated(run: state_module.RunState) -> checkpoint_module.Checkpoint:
    """The checkpoint, checked against the audit rows; mismatches fail closed."""
    point = checkpoint_module.load(run.checkpoint, checkpoint_version=run.checkpoint_version)
    phase = run.phase
    if phase == "model_ready":
        if point.decision is not None:
            raise errors.CheckpointInvalid("model_ready frontier carries an unconsumed decision")
    elif phase == "model_pending":
        call = _model_call(run, point.model_call_id)
        if call is None:
            raise errors.CheckpointInvalid(
                f"model_pending frontier names model call {point.model_call_id!r}, "
                "which has no model_calls row"
            )
        if call.turn != point.turn:
            raise errors.CheckpointInvalid(
                f"model call {call.id} is for turn {call.turn}, the frontier is at {point.turn}"
            )
        if call.state == "recorded":
            raise errors.CheckpointInvalid(
                f"model call {call.id} is recorded but the frontier is still model_pending"
            )
    elif phase == "tools_pending":
        if point.decision is None or not point.decision.tool_calls:
            raise errors.CheckpointInvalid("tools_pending frontier has no tool-call decision")
        wanted = [call.id for call in point.decision.tool_calls]
        found = [call.tool_call_id for call in _round(run, point.turn)]
        if wanted != found:
            raise errors.CheckpointInvalid(
                f"tools_pending frontier expects tool calls {wanted} for turn {point.turn}, "
                f"tool_calls rows hold {found}"
            )
    elif phase == "reply_ready":
        if point.decision is None or point.decision.content is None:
            raise errors.CheckpointInvalid("reply_ready frontier has no reply content")
        if run.delivery is None:
            raise errors.CheckpointInvalid("reply_ready frontier has no deliveries row")
    else:
        raise errors.CheckpointInvalid(f"unknown frontier phase {phase!r}")
    return point


def _model_call(run: state_module.RunState, call_id: str | None) -> state_module.ModelCall | None:
    return next((call for call in run.model_calls if call.id == call_id), None)


def _round(run: state_module.RunState, turn: int) -> list[state_module.ToolCall]:
    return sorted((c for c in run.tool_calls if c.turn == turn), key=lambda c: c.position)


# -- the decision --------------------------------------------------------------------------


def next_action(run: state_module.RunState, known: state_module.Known) -> Action:
    if run.status in state_module.TERMINAL:
        return Stop(f"run is {run.status}")
    if run.status != "running" or run.lease_owner != known.worker_id:
        return Stop(f"run is {run.status}, leased by {run.lease_owner!r}")
    if run.lease_epoch != known.lease_epoch:
        return Stop(f"lease epoch moved on to {run.lease_epoch}")
    if run.cancel_requested:
        return Cancel()
    try:
        point = validated(run)
    except errors.CheckpointInvalid as error:
        return Finish("failed", f"checkpoint invalid: {error}")
    if run.phase == "model_ready":
        return _open_model_call(run, point, interrupt=())
    if run.phase == "model_pending":
        return _model_pending(run, point, known)
    if run.phase == "tools_pending":
        return _tools_pending(run, point, known)
    return _reply_ready(run, known)


def _budget_refusal(budget: state_module.Budget) -> Finish | None:
    if budget.iterations_used >= budget.iterations:
        return Finish(
            "budget_exhausted",
            f"iteration budget exhausted ({budget.iterations_used} of {budget.iterations})",
        )
    if budget.tokens_used >= budget.tokens:
        return Finish(
            "budget_exhausted", f"token budget exhausted ({budget.tokens_used} of {budget.tokens})"
        )
    return None


def _open_model_call(
    run: state_module.RunState, point: checkpoint_module.Checkpoint, *, interrupt: tuple[str, ...]
) -> Action:
    refusal = _budget_refusal(run.budget)
    if refusal is not None:
        return refusal
    attempts = [call.attempt for call in run.model_calls if call.turn == point.turn]
    return OpenModelCall(turn=point.turn, attempt=max(attempts, default=0) + 1, interrupt=interrupt)


def _model_pending(
    run: state_module.RunState, point: checkpoint_module.Checkpoint, known: state_module.Known
) -> Action:
    call = _model_call(run, point.model_call_id)
    assert call is not None  # validated() guarantees it
    if call.state != "pending":
        # failed or interrupted earlier: open a new call from the remaining budget
        return _open_model_call(run, point, interrupt=())
    if call.lease_epoch == known.lease_epoch:
        if call.id in known.model_results:
            return RecordModel(call.id)
        return CallModel(call.id)
    # opened under an earlier lease: its response (if any) is lost and never billed
    return _open_model_call(run, point, interrupt=(call.id,))


def _tools_pending(
    run: state_module.RunState, point: checkpoint_module.Checkpoint, known: state_module.Known
) -> Action:
    calls = _round(run, point.turn)
    for call in calls:
        if call.settled:
            continue
        if call.state == "reserved":
            if call.declaration and call.declaration.get("requires_approval"):
                return AwaitApproval(call.id)
            return _start(run, call)
        if call.state == "awaiting_approval":
            if call.approval == "approved":
                return _start(run, call)
            return AwaitApproval(call.id)
        if call.state == "started":
            if call.started_epoch == known.lease_epoch:
                if call.id in known.tool_results:
                    return SettleTool(call.id)
                if call.id not in known.tools_sent:
                    return ExecuteTool(call.id)
            return RecoverTool(call.id)
        raise AssertionError(f"unhandled tool call state {call.state!r}")
    return CloseRound(close_round(point, calls))


def _start(run: state_module.RunState, call: state_module.ToolCall) -> Action:
    charge = ("tool_calls", call.id) not in run.budget.charged
    if charge and run.budget.tool_calls_used >= run.budget.tool_calls:
        return Finish(
            "budget_exhausted",
            f"tool-call budget exhausted ({run.budget.tool_calls_used} of "
            f"{run.budget.tool_calls}) before {call.name} ({call.tool_call_id})",
        )
    return StartTool(call.id, charge=charge)


def _reply_ready(run: state_module.RunState, known: state_module.Known) -> Action:
    delivery = run.delivery
    assert delivery is not None
    if delivery.state == "pending":
        return SendReply()
    if delivery.state == "sending":
        if known.reply_acked:
            return FinishDelivered()
        # we cannot know whether an earlier POST arrived: ask, never resend blindly
        return QueryReply()
    return Finish("failed", f"checkpoint invalid: delivery is {delivery.state} but run is open")


# -- transitions' payloads (pure) ----------------------------------------------------------


def close_round(
    point: checkpoint_module.Checkpoint, calls: list[state_module.ToolCall]
) -> checkpoint_module.Checkpoint:
    """model_ready after a tool round: the assistant message and one answer per call."""
    assert point.decision is not None
    messages = [*point.transcript, point.decision.assistant_message()]
    for call in calls:
        content = checkpoint_module.tool_message_content(call.state, call.outcome)
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call.tool_call_id,
                "content": checkpoint_module.excerpt(content),
            }
        )
    return checkpoint_module.Checkpoint(
        transcript=tuple(messages), turn=point.turn + 1, usage=point.usage
    )


@dataclasses.dataclass(frozen=True)
class ToolReservation:
    tool_call_id: str
    position: int
    name: str
    arguments: str
    key: str
    declaration: dict[str, Any] | None
    state: str  # reserved, or failed when the call cannot be executed at all
    outcome: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class RecordPlan:
    """What recording one model response durably means."""

    call_id: str
    usage: dict[str, int]
    checkpoint: checkpoint_module.Checkpoint
    phase: str  # tools_pending | reply_ready
    tools: tuple[ToolReservation, ...] = ()
    reply: str | None = None
    exhausted: str | None = None  # set: bill the usage, then end budget_exhausted


def normalise(message: dict[str, Any]) -> checkpoint_module.Decision:
    """An OpenAI assistant message -> a Decision (raises WorldError when unusable)."""
    calls = message.get("tool_calls") or []
    try:
        if calls:
            return checkpoint_module.Decision(
                tool_calls=tuple(
                    checkpoint_module.ToolRequest(
                        id=call["id"],
                        name=call["function"]["name"],
                        arguments=call["function"].get("arguments") or "{}",
                    )
                    for call in calls
                )
            )
        return checkpoint_module.Decision(content=message.get("content") or "")
    except (KeyError, TypeError, ValueError) as error:
        raise errors.WorldError(f"model answered an unusable message: {error}") from None


def plan_record(
    run: state_module.RunState,
    call_id: str,
    message: dict[str, Any],
    usage: dict[str, int],
    declarations: dict[str, dict[str, Any]],
) -> RecordPlan:
    point = checkpoint_module.load(run.checkpoint, checkpoint_version=run.checkpoint_version)
    decision = normalise(message)
    billed = run.budget.tokens_used + int(usage.get("total_tokens", 0))
    exhausted = None
    if billed > run.budget.tokens:
        exhausted = (
            f"token budget exceeded by the last model response ({billed} of {run.budget.tokens})"
        )
    new_point = point.model_copy(
        update={"decision": decision, "model_call_id": None, "usage": point.usage.plus(usage)}
    )
    if decision.content is not None:
        return RecordPlan(
            call_id=call_id,
            usage=usage,
            checkpoint=new_point.model_copy(update={"reply": decision.content}),
            phase="reply_ready",
            reply=decision.content,
            exhausted=exhausted,
        )
    tools = tuple(
        _reservation(run.run_id, point.turn, position, request, declarations)
        for position, request in enumerate(decision.tool_calls)
    )
    return RecordPlan(
        call_id=call_id,
        usage=usage,
        checkpoint=new_point,
        phase="tools_pending",
        tools=tools,
        exhausted=exhausted,
    )


def _reservation(
    run_id: str,
    turn: int,
    position: int,
    request: checkpoint_module.ToolRequest,
    declarations: dict[str, dict[str, Any]],
) -> ToolReservation:
    declaration = declarations.get(request.name)
    reserved = ToolReservation(
        tool_call_id=request.id,
        position=position,
        name=request.name,
        arguments=request.arguments,
        key=tool_key(run_id, turn, request.id),
        declaration=declaration,
        state="reserved",
    )
    if declaration is None:
        return dataclasses.replace(
            reserved, state="failed", outcome={"error": f"unknown tool {request.name!r}"}
        )
    try:
        arguments = json.loads(request.arguments)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return dataclasses.replace(
            reserved, state="failed", outcome={"error": "arguments are not a JSON object"}
        )
    return reserved


# -- recovery of an interrupted tool call --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Replay:
    """Run again with the same key; no new budget."""


@dataclasses.dataclass(frozen=True)
class Query:
    """Ask the service by key whether the effect happened."""


@dataclasses.dataclass(frozen=True)
class Unknown:
    reason: str


Recovery = Replay | Query | Unknown


def recover_tool(call: state_module.ToolCall, current: dict[str, Any] | None) -> Recovery:
    """A call started under an earlier epoch (or sent with no answer): never re-execute
    a non-replayable effect blindly."""
    original = call.declaration or {}
    if (
        current is not None
        and original.get("replay") == "replayable"
        and current.get("replay") == "replayable"
        and original.get("fingerprint") == current.get("fingerprint")
    ):
        return Replay()
    if current is not None and current.get("queryable"):
        return Query()
    if current is None:
        return Unknown(f"tool {call.name!r} is no longer declared")
    return Unknown(f"tool {call.name!r} is not replayable and cannot be queried")


def after_query_not_applied(call: state_module.ToolCall, current: dict[str, Any]) -> Recovery:
    """The service says the effect has not happened (yet). The interrupted request may still
    be on its way and land after the query answered, so "not applied" is no licence to send
    it again: only a service that honours idempotency keys makes a second request with the
    same key harmless. Every other call becomes outcome_unknown, never re-executed."""
    original = call.declaration or {}
    if original.get("honours_idempotency_key") and current.get("honours_idempotency_key"):
        return Replay()
    return Unknown(
        f"tool {call.name!r} had not applied key {call.key} when asked, but the interrupted "
        "request may still be in flight; a non-replayable call is never re-executed"
    )


def reply_after_query(status_code: int) -> str:
    """GET /replies/{key}: `delivered`, `send` (never arrived) or `uncertain`."""
    if status_code == 200:
        return "delivered"
    if status_code == 404:
        return "send"
    return "uncertain"
