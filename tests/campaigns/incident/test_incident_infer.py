"""Fault inference from literal event trails, redaction, and the replay's conclusion."""

from __future__ import annotations

from typing import Any

from harness.incident import incident, redaction


def trail(*items: tuple[str, str | None] | tuple[str, str | None, dict[str, Any]]) -> list[dict]:
    events = []
    for number, item in enumerate(items, start=1):
        kind, worker = item[0], item[1]
        data = item[2] if len(item) > 2 else {}
        events.append({"id": number, "kind": kind, "worker_id": worker, "data": data})
    return events


def test_tool_started_without_outcome_then_another_claim() -> None:
    events = trail(
        ("run.created", None),
        ("run.claimed", "w1"),
        ("model.call_started", "w1"),
        ("checkpoint.saved", "w1", {"phase": "tools_pending"}),
        ("tool.started", "w1"),
        ("tool.succeeded", "w1"),
        ("checkpoint.saved", "w1", {"phase": "model_ready"}),
        ("model.call_started", "w1"),
        ("checkpoint.saved", "w1", {"phase": "tools_pending"}),
        ("tool.started", "w1"),
        ("run.claimed", "w2"),
        ("tool.started", "w2"),
        ("tool.succeeded", "w2"),
        ("run.succeeded", "w2"),
    )
    found = incident.infer_faults(events, status="succeeded")
    assert found.faults == ["kill@tool.started#2"]
    assert "w1" in found.notes[0] and "w2 claimed the run" in found.notes[0]


def test_interrupted_model_call_rescued_by_the_reconciler() -> None:
    events = trail(
        ("run.claimed", "w1"),
        ("model.call_started", "w1"),
        ("run.reconciled", None, {"from_owner": "w1", "to": "pending"}),
        ("run.claimed", "w2"),
        ("model.call_interrupted", "w2"),
        ("model.call_started", "w2"),
        ("checkpoint.saved", "w2", {"phase": "reply_ready"}),
        ("reply.sending", "w2"),
        ("reply.delivered", "w2"),
        ("run.succeeded", "w2"),
    )
    assert incident.infer_faults(events, status="succeeded").faults == ["kill@model.pending#1"]


def test_reply_sending_without_delivery_and_a_crash_right_after_the_claim() -> None:
    events = trail(
        ("run.claimed", "w1"),
        ("run.reconciled", None, {"from_owner": "w1"}),
        ("run.claimed", "w2"),
        ("model.call_started", "w2"),
        ("checkpoint.saved", "w2", {"phase": "reply_ready"}),
        ("reply.sending", "w2"),
        ("run.reconciled", None, {"from_owner": "w2"}),
        ("run.claimed", "w3"),
        ("reply.delivered", "w3"),
        ("run.succeeded", "w3"),
    )
    found = incident.infer_faults(events, status="succeeded")
    assert found.faults == ["kill@run.claimed#1", "kill@reply.sending#1"]


def test_a_run_still_held_when_exported_is_stuck_where_its_holder_stopped() -> None:
    events = trail(("run.claimed", "w1"), ("model.call_started", "w1"))
    found = incident.infer_faults(events, status="running")
    assert found.faults == ["kill@model.pending#1"]
    assert "still running" in found.notes[0]


def test_a_clean_trail_has_no_fault() -> None:
    events = trail(("run.claimed", "w1"), ("run.succeeded", "w1"))
    found = incident.infer_faults(events, status="succeeded")
    assert found.faults == [] and "without a fault" in found.notes[0]


def test_redaction_keeps_the_shape() -> None:
    value = {"order": "ord-42", "amount": 4999, "ok": True, "items": ["a", 1.5, None]}
    assert redaction.Redactor().value(value) == {
        "key_1": "[redacted 6 chars]",
        "key_2": 0,
        "key_3": True,
        "key_4": ["[redacted 1 chars]", 0.0, None],
    }


def test_conclusion_by_verdict() -> None:
    assert incident.conclusion("FAIL") == "incident reproduced"
    assert incident.conclusion("PASS") == "incident no longer reproduces"
    assert incident.conclusion("INCONCLUSIVE").startswith("incident replay inconclusive")
