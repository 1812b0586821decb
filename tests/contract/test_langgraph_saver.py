"""What each of the checkpointer's two calls makes durable (langgraph_engine/reporting_saver.py):
`put_writes` a task's writes, `put` the next checkpoint, whose newest messages are the same
output. Both name the same boundary, so whichever commits first is the decision's point."""

from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres missing")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # the examples' agent_kit
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "langgraph_engine"))
import reporting_saver

CALL = {"name": "refund_order", "args": {}, "id": "call_refund"}
DECISION = AIMessage(content="", tool_calls=[CALL])
RESULT = ToolMessage(content="{}", tool_call_id="call_refund")


def _checkpoint(*messages: object) -> dict[str, object]:
    return {"channel_values": {"messages": list(messages)}}


@pytest.mark.parametrize(
    ("messages", "boundary", "detail"),
    [
        ([HumanMessage(content="hi")], None, {}),
        (
            [HumanMessage(content="hi"), DECISION],
            "tools.pending",
            {"tool_call_ids": ["call_refund"]},
        ),
        ([DECISION, RESULT], "model.ready", {"tool_call_ids": ["call_refund"]}),
        ([DECISION, RESULT, AIMessage(content="Refunded.")], "reply.ready", {}),
    ],
)
def test_put_and_put_writes_name_the_same_boundary(
    messages: list[object], boundary: str | None, detail: dict[str, object]
) -> None:
    by_put = reporting_saver.boundary_of_checkpoint(_checkpoint(*messages))  # type: ignore[arg-type]
    assert by_put == (boundary, detail)
    if boundary is not None:  # the task's writes: the node's output, the newest messages
        output = (
            [m for m in messages[1:] if m is not DECISION]
            if boundary == "model.ready"
            else messages[-1:]
        )
        assert reporting_saver.boundary_of([("messages", output)]) == by_put


def test_a_checkpoint_without_messages_makes_nothing_durable() -> None:
    assert reporting_saver.boundary_of_checkpoint({"channel_values": {}}) == (None, {})  # type: ignore[arg-type]
