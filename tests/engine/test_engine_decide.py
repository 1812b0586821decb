"""decide.next_action on literal durable states: every phase and every recovery rule."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reference_engine import checkpoint, decide
from reference_engine import state as S

RUN = "00000000-0000-0000-0000-000000000001"
ME = "w-me"
EPOCH = 3
USER = [{"role": "user", "content": "[crashcert-run: k] refund please"}]
REFUND_DECL = {
    "type": "function",
    "function": {"name": "refund_order", "parameters": {"type": "object"}},
    "replay": "non_replayable",
    "queryable": True,
    "requires_approval": False,
    "fingerprint": "f-refund",
}
LOOKUP_DECL = {
    "type": "function",
    "function": {"name": "lookup_order", "parameters": {"type": "object"}},
    "replay": "replayable",
    "queryable": False,
    "requires_approval": False,
    "fingerprint": "f-lookup",
}
SEND_DECL = {**REFUND_DECL, "function": {"name": "send_email"}, "queryable": False}


def budget(**kw: Any) -> S.Budget:
    return S.Budget(**{"iterations": 6, "tool_calls": 4, "tokens": 5000, **kw})


def known(**kw: Any) -> S.Known:
    return S.Known(**{"worker_id": ME, "lease_epoch": EPOCH, **kw})


def point(**kw: Any) -> dict[str, Any]:
    return checkpoint.dump(checkpoint.Checkpoint(**{"transcript": tuple(USER), "turn": 0, **kw}))


def run(phase: str, cp: dict[str, Any], **kw: Any) -> S.RunState:
    base: dict[str, Any] = {
        "run_id": RUN,
        "status": "running",
        "lease_owner": ME,
        "lease_epoch": EPOCH,
        "cancel_requested": False,
        "attempts": 1,
        "max_attempts": 5,
        "frontier_version": 4,
        "phase": phase,
        "checkpoint": cp,
        "checkpoint_version": 1,
        "budget": budget(),
    }
    base.update(kw)
    return S.RunState(**base)


def tool_decision(*calls: tuple[str, str]) -> checkpoint.Decision:
    return checkpoint.Decision(
        tool_calls=tuple(
            checkpoint.ToolRequest(id=cid, name=name, arguments='{"order_id": "o1"}')
            for cid, name in calls
        )
    )


def tool_row(cid: str, decl: dict[str, Any], state: str = "reserved", **kw: Any) -> S.ToolCall:
    return S.ToolCall(
        **{
            "id": f"cmd-{cid}",
            "turn": 0,
            "position": 0,
            "tool_call_id": cid,
            "name": decl["function"]["name"],
            "arguments": '{"order_id": "o1"}',
            "key": decide.tool_key(RUN, 0, cid),
            "declaration": decl,
            "state": state,
            **kw,
        }
    )


def tools_pending(*rows: S.ToolCall, **kw: Any) -> S.RunState:
    decision = tool_decision(*((row.tool_call_id, row.name) for row in rows))
    return run("tools_pending", point(decision=decision), tool_calls=rows, **kw)


# -- who may act ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(S.TERMINAL))
def test_terminal_runs_are_left_alone(status: str) -> None:
    assert isinstance(
        decide.next_action(run("model_ready", point(), status=status), known()), decide.Stop
    )


def test_a_run_leased_to_someone_else_or_a_newer_epoch_is_not_touched() -> None:
    assert isinstance(
        decide.next_action(run("model_ready", point(), lease_owner="w-other"), known()), decide.Stop
    )
    assert isinstance(
        decide.next_action(run("model_ready", point(), lease_epoch=EPOCH + 1), known()), decide.Stop
    )


def test_cancellation_wins_over_everything() -> None:
    state = run("model_ready", point(), cancel_requested=True)
    assert decide.next_action(state, known()) == decide.Cancel()


# -- model phases --------------------------------------------------------------------------


def test_fresh_run_opens_the_first_model_call() -> None:
    assert decide.next_action(run("model_ready", point()), known()) == decide.OpenModelCall(
        turn=0, attempt=1
    )


def test_iteration_budget_exhausted_refuses_inference() -> None:
    action = decide.next_action(
        run("model_ready", point(), budget=budget(iterations_used=6)), known()
    )
    assert isinstance(action, decide.Finish) and action.status == "budget_exhausted"
    assert "iteration" in action.reason


def test_tokens_at_limit_refuse_inference() -> None:
    action = decide.next_action(
        run("model_ready", point(), budget=budget(tokens_used=5000)), known()
    )
    assert isinstance(action, decide.Finish) and "token" in action.reason


def pending(call_epoch: int, state: str = "pending") -> S.RunState:
    call = S.ModelCall(id="mc-1", turn=0, attempt=1, lease_epoch=call_epoch, state=state)
    return run("model_pending", point(model_call_id="mc-1"), model_calls=(call,))


def test_own_pending_call_is_made() -> None:
    assert decide.next_action(pending(EPOCH), known()) == decide.CallModel("mc-1")


def test_own_pending_call_with_response_in_memory_is_recorded() -> None:
    action = decide.next_action(pending(EPOCH), known(model_results=frozenset({"mc-1"})))
    assert action == decide.RecordModel("mc-1")


def test_pending_call_of_an_earlier_epoch_is_interrupted_and_a_new_one_opened() -> None:
    action = decide.next_action(pending(EPOCH - 1), known())
    assert action == decide.OpenModelCall(turn=0, attempt=2, interrupt=("mc-1",))


def test_interrupted_call_reopens_only_within_budget() -> None:
    state = dataclasses.replace(pending(EPOCH - 1), budget=budget(iterations_used=6))
    action = decide.next_action(state, known())
    assert isinstance(action, decide.Finish) and action.status == "budget_exhausted"


def test_failed_call_is_reopened_without_interrupting() -> None:
    assert decide.next_action(pending(EPOCH - 1, "failed"), known()) == decide.OpenModelCall(
        turn=0, attempt=2
    )


# -- tool phase ----------------------------------------------------------------------------


def test_reserved_call_is_started_and_billed_once() -> None:
    state = tools_pending(tool_row("c1", LOOKUP_DECL))
    assert decide.next_action(state, known()) == decide.StartTool("cmd-c1", charge=True)
    already = dataclasses.replace(
        state, budget=budget(tool_calls_used=1, charged=frozenset({("tool_calls", "cmd-c1")}))
    )
    assert decide.next_action(already, known()) == decide.StartTool("cmd-c1", charge=False)


def test_tool_budget_exhausted_before_start() -> None:
    state = tools_pending(tool_row("c1", LOOKUP_DECL), budget=budget(tool_calls_used=4))
    action = decide.next_action(state, known())
    assert isinstance(action, decide.Finish) and action.status == "budget_exhausted"


def test_approval_required_parks_the_run_until_approved() -> None:
    decl = {**REFUND_DECL, "requires_approval": True}
    assert decide.next_action(tools_pending(tool_row("c1", decl)), known()) == (
        decide.AwaitApproval("cmd-c1")
    )
    waiting = tools_pending(tool_row("c1", decl, "awaiting_approval"))
    assert decide.next_action(waiting, known()) == decide.AwaitApproval("cmd-c1")
    approved = tools_pending(tool_row("c1", decl, "awaiting_approval", approval="approved"))
    assert decide.next_action(approved, known()) == decide.StartTool("cmd-c1", charge=True)


def test_started_by_me_and_never_sent_is_executed() -> None:
    state = tools_pending(tool_row("c1", REFUND_DECL, "started", started_epoch=EPOCH))
    assert decide.next_action(state, known()) == decide.ExecuteTool("cmd-c1")


def test_started_by_me_with_outcome_in_memory_is_settled() -> None:
    state = tools_pending(tool_row("c1", REFUND_DECL, "started", started_epoch=EPOCH))
    action = decide.next_action(
        state, known(tool_results=frozenset({"cmd-c1"}), tools_sent=frozenset({"cmd-c1"}))
    )
    assert action == decide.SettleTool("cmd-c1")


def test_started_and_sent_without_answer_is_recovered_not_resent() -> None:
    state = tools_pending(tool_row("c1", REFUND_DECL, "started", started_epoch=EPOCH))
    action = decide.next_action(state, known(tools_sent=frozenset({"cmd-c1"})))
    assert action == decide.RecoverTool("cmd-c1")


def test_started_under_an_earlier_epoch_is_recovered() -> None:
    state = tools_pending(tool_row("c1", REFUND_DECL, "started", started_epoch=EPOCH - 1))
    assert decide.next_action(state, known()) == decide.RecoverTool("cmd-c1")


def test_settled_calls_are_reused_and_the_round_closes() -> None:
    rows = (
        tool_row("c1", LOOKUP_DECL, "succeeded", outcome={"result": {"amount": 5}}),
        tool_row("c2", REFUND_DECL, "outcome_unknown", position=1, outcome={"error": "x"}),
        tool_row("c3", SEND_DECL, "failed", position=2, outcome={"error": "bad request"}),
        tool_row("c4", SEND_DECL, "rejected", position=3, outcome={"error": "no"}),
    )
    action = decide.next_action(tools_pending(*rows), known())
    assert isinstance(action, decide.CloseRound)
    cp = action.checkpoint
    assert cp.turn == 1 and cp.decision is None
    assistant, *answers = cp.transcript[len(USER) :]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2", "c3", "c4"]
    bodies = [json.loads(a["content"]) for a in answers]
    assert [a["tool_call_id"] for a in answers] == ["c1", "c2", "c3", "c4"]
    assert bodies[0] == {"status": "ok", "result": {"amount": 5}}
    assert bodies[1] == {"status": "outcome_unknown", "note": checkpoint.UNKNOWN_NOTE}
    assert bodies[2] == {"status": "error", "error": "bad request"}
    assert bodies[3]["status"] == "error"


def test_tools_are_worked_in_order() -> None:
    rows = (
        tool_row("c1", LOOKUP_DECL, "succeeded", outcome={"result": 1}),
        tool_row("c2", REFUND_DECL, position=1),
        tool_row("c3", LOOKUP_DECL, position=2),
    )
    assert decide.next_action(tools_pending(*rows), known()) == decide.StartTool("cmd-c2", True)


# -- recovery rules for an interrupted tool call -------------------------------------------


def started(decl: dict[str, Any]) -> S.ToolCall:
    return tool_row("c1", decl, "started", started_epoch=EPOCH - 1)


def test_replayable_with_same_fingerprint_is_replayed() -> None:
    assert decide.recover_tool(started(LOOKUP_DECL), LOOKUP_DECL) == decide.Replay()


def test_replayable_with_changed_fingerprint_is_not_replayed() -> None:
    changed = {**LOOKUP_DECL, "fingerprint": "f-new"}
    assert isinstance(decide.recover_tool(started(LOOKUP_DECL), changed), decide.Unknown)


def test_replayable_turned_non_replayable_is_not_replayed() -> None:
    changed = {**LOOKUP_DECL, "replay": "non_replayable", "queryable": True}
    assert decide.recover_tool(started(LOOKUP_DECL), changed) == decide.Query()


def test_non_replayable_queryable_is_asked_by_key() -> None:
    assert decide.recover_tool(started(REFUND_DECL), REFUND_DECL) == decide.Query()


def test_non_replayable_not_queryable_is_outcome_unknown() -> None:
    assert isinstance(decide.recover_tool(started(SEND_DECL), SEND_DECL), decide.Unknown)


def test_tool_no_longer_declared_is_outcome_unknown() -> None:
    assert isinstance(decide.recover_tool(started(LOOKUP_DECL), None), decide.Unknown)


def test_not_applied_when_asked_is_still_unknown_for_a_non_replayable_call() -> None:
    # The interrupted request may land after the query answered: never send it again.
    recovery = decide.after_query_not_applied(started(REFUND_DECL), REFUND_DECL)
    assert isinstance(recovery, decide.Unknown)
    assert "may still be in flight" in recovery.reason


def test_not_applied_at_a_service_that_honours_keys_is_sent_again() -> None:
    keyed = {**REFUND_DECL, "honours_idempotency_key": True}
    assert decide.after_query_not_applied(started(keyed), keyed) == decide.Replay()


# -- reply phase ---------------------------------------------------------------------------


def reply_ready(state: str, attempts: int = 0) -> S.RunState:
    decision = checkpoint.Decision(content="Refunded.")
    return run(
        "reply_ready",
        point(decision=decision, reply="Refunded."),
        delivery=S.Delivery(decide.reply_key(RUN), state, attempts),
    )


def test_pending_delivery_is_sent() -> None:
    assert decide.next_action(reply_ready("pending"), known()) == decide.SendReply()


def test_sending_delivery_is_asked_about_never_resent_blindly() -> None:
    assert decide.next_action(reply_ready("sending", 1), known()) == decide.QueryReply()


def test_acknowledged_delivery_finishes() -> None:
    assert decide.next_action(reply_ready("sending", 1), known(reply_acked=True)) == (
        decide.FinishDelivered()
    )


@pytest.mark.parametrize(
    ("code", "verdict"), [(200, "delivered"), (404, "send"), (405, "uncertain"), (418, "uncertain")]
)
def test_reply_query_verdicts(code: int, verdict: str) -> None:
    assert decide.reply_after_query(code) == verdict


# -- recording a model response ------------------------------------------------------------


def test_plan_record_reserves_deterministic_keys_and_fails_unknown_tools() -> None:
    state = pending(EPOCH)
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "refund_order", "arguments": '{"order_id": "o1"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
            {
                "id": "c3",
                "type": "function",
                "function": {"name": "refund_order", "arguments": "[1]"},
            },
        ],
    }
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    plan = decide.plan_record(state, "mc-1", message, usage, {"refund_order": REFUND_DECL})
    assert plan.phase == "tools_pending" and plan.exhausted is None
    assert [t.state for t in plan.tools] == ["reserved", "failed", "failed"]
    assert plan.tools[0].key == decide.tool_key(RUN, 0, "c1") == decide.tool_key(RUN, 0, "c1")
    assert plan.tools[0].key != decide.tool_key(RUN, 1, "c1")
    assert plan.checkpoint.usage.total_tokens == 15
    assert plan.checkpoint.model_call_id is None


def test_plan_record_content_goes_to_the_outbox() -> None:
    plan = decide.plan_record(
        pending(EPOCH), "mc-1", {"role": "assistant", "content": "Done."}, {"total_tokens": 3}, {}
    )
    assert plan.phase == "reply_ready" and plan.reply == "Done."


def test_plan_record_over_token_budget_bills_and_ends() -> None:
    state = dataclasses.replace(pending(EPOCH), budget=budget(tokens_used=4990))
    plan = decide.plan_record(
        state, "mc-1", {"role": "assistant", "content": "x"}, {"total_tokens": 20}, {}
    )
    assert plan.exhausted is not None and "5010 of 5000" in plan.exhausted


# -- fail closed ---------------------------------------------------------------------------


def test_unknown_checkpoint_version_fails_the_run() -> None:
    action = decide.next_action(run("model_ready", {**point(), "v": 2}), known())
    assert isinstance(action, decide.Finish) and action.status == "failed"
    assert "unknown checkpoint version" in action.reason


def test_malformed_checkpoint_fails_the_run() -> None:
    action = decide.next_action(run("model_ready", {"v": 1, "transcript": "nope"}), known())
    assert isinstance(action, decide.Finish) and "malformed" in action.reason


def test_tools_pending_without_tool_call_rows_fails_closed() -> None:
    state = run("tools_pending", point(decision=tool_decision(("c1", "lookup_order"))))
    action = decide.next_action(state, known())
    assert isinstance(action, decide.Finish) and action.status == "failed"
    assert "tool_calls rows hold []" in action.reason


def test_model_pending_without_its_call_row_fails_closed() -> None:
    action = decide.next_action(run("model_pending", point(model_call_id="ghost")), known())
    assert isinstance(action, decide.Finish) and "ghost" in action.reason


def test_reply_ready_without_delivery_row_fails_closed() -> None:
    decision = checkpoint.Decision(content="x")
    action = decide.next_action(run("reply_ready", point(decision=decision)), known())
    assert isinstance(action, decide.Finish) and "deliveries" in action.reason
