"""`tool.approval` on literal histories: a gated tool reaches the world only after the
harness sent its approval, and never after a rejection."""

from __future__ import annotations

from harness.checkers import approval, verdict
from harness.record import history as history_module
from harness.scenario import schema
from harness.world import ledger

RUN_KEY = "rk-9"
ARGUMENTS = {"account": f"acct-{RUN_KEY}"}


def scenario(action: str | None) -> schema.Scenario:
    data = {
        "name": "gated",
        "input": {"user": "Delete acct-{run}."},
        "tools": [
            {
                "name": "delete_account",
                "replay": "non_replayable",
                "effect": "write",
                "requires_approval": True,
            }
        ],
        "turns": [
            {
                "tool_calls": [
                    {
                        "id": "call_delete",
                        "name": "delete_account",
                        "arguments": {"account": "acct-{run}"},
                    }
                ]
            },
            {"content": "Done."},
        ],
    }
    if action:
        data["actions"] = [{"do": action, "call": "call_delete"}]
    return schema.parse(data)


def trial(
    action: str | None, *, action_seq: int, request_seqs: list[int]
) -> history_module.TrialHistory:
    events: list[history_module.Event] = []
    if action:
        events.append(
            history_module.ActionTaken(
                seq=action_seq + 1,
                do=action,
                call="call_delete",
                at="awaiting_approval",
                requested_seq=action_seq,
            )
        )
    tools = [
        ledger.ToolRequest(
            seq=seq,
            tool="delete_account",
            key=f"{RUN_KEY}:call_delete",
            arguments=ARGUMENTS,
            status_code=200,
            outcome="ok",
        )
        for seq in request_seqs
    ]
    return history_module.TrialHistory(
        trial_id="t1",
        engine="e",
        scenario=scenario(action),
        run_key=RUN_KEY,
        events=events,
        tools=tools,
    )


def test_request_after_the_approval_passes() -> None:
    result = approval.check(trial("approve", action_seq=10, request_seqs=[14]))
    assert result.verdict is verdict.Verdict.PASS, result


def test_request_before_the_approval_fails() -> None:
    result = approval.check(trial("approve", action_seq=10, request_seqs=[6, 14]))
    assert result.verdict is verdict.Verdict.FAIL
    assert "before its approval was sent" in result.summary


def test_request_after_a_rejection_fails() -> None:
    result = approval.check(trial("reject", action_seq=10, request_seqs=[14]))
    assert result.verdict is verdict.Verdict.FAIL
    assert "was rejected" in result.summary


def test_rejected_and_never_run_passes() -> None:
    result = approval.check(trial("reject", action_seq=10, request_seqs=[]))
    assert result.verdict is verdict.Verdict.PASS, result


def test_request_without_any_decision_fails() -> None:
    result = approval.check(trial(None, action_seq=0, request_seqs=[3]))
    assert result.verdict is verdict.Verdict.FAIL
    assert "without one" in result.summary


def test_a_failed_action_is_no_approval() -> None:
    history = trial("approve", action_seq=10, request_seqs=[14])
    failed = history.events[0].model_copy(update={"ok": False})
    history = history.model_copy(update={"events": [failed]})
    assert approval.check(history).verdict is verdict.Verdict.FAIL
