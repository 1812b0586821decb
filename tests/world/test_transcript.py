"""The model's transcript checks, as a pure function on literal messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.scenario import schema
from harness.world import transcript

SCENARIO = schema.parse(
    {
        "name": "transcript",
        "input": {"user": "go"},
        "tools": [
            {"name": "refund", "replay": "non_replayable", "effect": "write"},
            {"name": "email", "replay": "non_replayable", "effect": "write"},
        ],
        "turns": [
            {
                "tool_calls": [
                    {"id": "c1", "name": "refund", "arguments": {"order": "{run}"}},
                    {"id": "c2", "name": "email", "arguments": {"to": "a@b"}},
                ]
            },
            {"content": "done {run}"},
        ],
    }
)


def _assistant(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def _tool(call_id: str, status: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"status": status})}


START = [{"role": "user", "content": "go [crashcert-run: r]"}]
ROUND = _assistant(("c1", "refund", {"order": "r"}), ("c2", "email", {"to": "a@b"}))


def _codes(messages: list[dict[str, Any]]) -> list[str]:
    problems = transcript.check(messages, turns=SCENARIO.turns, run_key="r")
    return [problem.split(":")[0] for problem in problems]


def test_a_clean_round_has_no_problems() -> None:
    assert _codes([*START, ROUND, _tool("c2"), _tool("c1", "outcome_unknown")]) == []
    final = {"role": "assistant", "content": [{"type": "text", "text": "done r"}]}
    assert _codes([*START, ROUND, _tool("c1"), _tool("c2", "error"), final]) == []


@pytest.mark.parametrize(
    ("messages", "codes"),
    [
        ([*START, ROUND, _tool("c1")], ["unanswered"]),
        ([*START, ROUND, _tool("c1"), _tool("c2"), _tool("c1")], ["duplicate_answer"]),
        ([*START, _tool("c1"), ROUND, _tool("c1"), _tool("c2")], ["unknown_call"]),
        (
            [*START, ROUND, _tool("c1"), _tool("c2"), ROUND],
            ["duplicate_call_id"] * 2 + ["script_mismatch"] * 2,
        ),
        (
            [*START, ROUND, _tool("c1"), {"role": "tool", "content": "{}"}],
            ["malformed", "unanswered"],
        ),
        ([*START, ROUND, _tool("c1"), _tool("c2", "fine")], ["bad_tool_content"]),
        (
            [*START, _assistant(("c1", "refund", {"order": "r"})), _tool("c1")],
            ["script_mismatch"],
        ),
        (
            [
                *START,
                _assistant(("c1", "email", {"order": "r"}), ("c2", "email", {"to": "a@b"})),
                _tool("c1"),
                _tool("c2"),
            ],
            ["script_mismatch"],
        ),
        (
            [*START, ROUND, _tool("c1"), _tool("c2"), {"role": "assistant", "content": "done"}],
            ["script_mismatch"],
        ),
        (
            [
                *START,
                ROUND,
                _tool("c1"),
                _tool("c2"),
                {"role": "assistant", "content": "done r"},
                {"role": "assistant", "content": "again"},
            ],
            ["script_mismatch"],
        ),
        ([*START, {"role": "assistant", "tool_calls": "c1"}], ["malformed", "script_mismatch"]),
    ],
    ids=[
        "unanswered",
        "answered-twice",
        "answer-before-call",
        "round-repeated",
        "no-call-id",
        "unknown-status",
        "missing-call",
        "wrong-name",
        "wrong-content",
        "beyond-script",
        "tool-calls-not-a-list",
    ],
)
def test_problems_are_found(messages: list[dict[str, Any]], codes: list[str]) -> None:
    assert _codes(messages) == codes


def test_text_of_content_parts() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]
    assert transcript.text_of(parts) == "ab"
    assert transcript.text_of(None) is None
    assert transcript.text_of(3) is None
