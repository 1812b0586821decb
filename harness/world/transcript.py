"""Checks of the transcript an engine sends to the scripted model.

Pure functions from the request's messages to a list of problems. The model records the
problems in its ledger and still answers: the checkers judge, the model only observes.
Each problem starts with a stable code and a colon (`unanswered: ...`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness.scenario import schema

TOOL_STATUSES = ("ok", "error", "outcome_unknown")

UNANSWERED = "unanswered"  # a tool call with no tool message before the next assistant one
DUPLICATE_ANSWER = "duplicate_answer"  # a tool call answered more than once
LATE_ANSWER = "late_answer"  # answered only after a later assistant message
UNKNOWN_CALL = "unknown_call"  # a tool message for a call no earlier assistant message made
DUPLICATE_CALL_ID = "duplicate_call_id"  # two assistant messages made calls with one id
BAD_TOOL_CONTENT = "bad_tool_content"  # not a JSON object with a known status
SCRIPT_MISMATCH = "script_mismatch"  # an assistant message differs from the scripted turn
MALFORMED = "malformed"  # a message the checks cannot read


def text_of(content: Any) -> str | None:
    """The text of a message's content: a string, or a list of `{"type": "text"}` parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        return "".join(str(part) for part in parts)
    return None


def check(
    messages: Sequence[dict[str, Any]],
    *,
    turns: Sequence[schema.Turn],
    run_key: str,
) -> list[str]:
    problems: list[str] = []
    # Calls of the latest assistant message still waiting for their answer.
    pending: dict[str, str] = {}
    answered: set[str] = set()
    closed: set[str] = set()  # calls of earlier rounds: answering them now is late
    assistant_count = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call_id, name in pending.items():
                problems.append(f"{UNANSWERED}: tool call {call_id!r} ({name}) was never answered")
                closed.add(call_id)
            pending = {}
            expected = turns[assistant_count] if assistant_count < len(turns) else None
            calls = _calls(message, index, problems)
            for call_id, name, _ in calls:
                if call_id in answered or call_id in closed:
                    problems.append(
                        f"{DUPLICATE_CALL_ID}: messages[{index}] repeats tool call id {call_id!r}"
                    )
                    continue
                pending[call_id] = name
            problems.extend(
                _compare(
                    message, calls, expected, index=index, turn=assistant_count, run_key=run_key
                )
            )
            assistant_count += 1
        elif role == "tool":
            answer_id = message.get("tool_call_id")
            if not isinstance(answer_id, str):
                problems.append(
                    f"{MALFORMED}: messages[{index}] is a tool message without tool_call_id"
                )
                continue
            if answer_id in pending:
                del pending[answer_id]
                answered.add(answer_id)
            elif answer_id in answered:
                problems.append(
                    f"{DUPLICATE_ANSWER}: tool call {answer_id!r} answered again "
                    f"at messages[{index}]"
                )
            elif answer_id in closed:
                problems.append(
                    f"{LATE_ANSWER}: tool call {answer_id!r} answered at messages[{index}], "
                    "after a later assistant message"
                )
            else:
                problems.append(
                    f"{UNKNOWN_CALL}: messages[{index}] answers tool call {answer_id!r}, "
                    "which no earlier assistant message made"
                )
            problem = _tool_content_problem(message.get("content"))
            if problem:
                problems.append(f"{BAD_TOOL_CONTENT}: messages[{index}] ({answer_id!r}) {problem}")
    for call_id, name in pending.items():
        problems.append(f"{UNANSWERED}: tool call {call_id!r} ({name}) was never answered")
    return problems


def _calls(message: dict[str, Any], index: int, problems: list[str]) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of an assistant message's tool calls; oddities become problems."""
    raw = message.get("tool_calls") or []
    if not isinstance(raw, list):
        problems.append(f"{MALFORMED}: messages[{index}].tool_calls is not a list")
        return []
    calls = []
    for position, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call_id, str):
            problems.append(
                f"{MALFORMED}: messages[{index}].tool_calls[{position}] has no id or function"
            )
            continue
        calls.append((call_id, str(function.get("name")), str(function.get("arguments"))))
    return calls


def _compare(
    message: dict[str, Any],
    calls: list[tuple[str, str, str]],
    expected: schema.Turn | None,
    *,
    index: int,
    turn: int,
    run_key: str,
) -> list[str]:
    where = f"{SCRIPT_MISMATCH}: messages[{index}] (turn {turn + 1})"
    if expected is None:
        return [f"{where} has no scripted turn"]
    if not expected.tool_calls:
        content = text_of(message.get("content"))
        wanted = schema.substitute_run_key(expected.content, run_key)
        problems = [f"{where} has tool calls; the script answered with content"] if calls else []
        if content != wanted:
            problems.append(f"{where} content {content!r} is not the scripted {wanted!r}")
        return problems
    ids = [call_id for call_id, _, _ in calls]
    wanted_ids = [call.id for call in expected.tool_calls]
    if ids != wanted_ids:
        return [f"{where} tool call ids {ids} are not the scripted {wanted_ids}"]
    problems = []
    for (call_id, name, arguments), scripted in zip(calls, expected.tool_calls, strict=True):
        if name != scripted.name:
            problems.append(f"{where} tool call {call_id!r} names {name!r}, not {scripted.name!r}")
        wanted_arguments = schema.substitute_run_key(scripted.arguments, run_key)
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = arguments
        if parsed != wanted_arguments:
            problems.append(
                f"{where} tool call {call_id!r} arguments {arguments} are not the scripted "
                f"{json.dumps(wanted_arguments, sort_keys=True)}"
            )
    return problems


def _tool_content_problem(content: Any) -> str | None:
    text = text_of(content)
    if text is None:
        return "content is not text"
    try:
        value = json.loads(text)
    except ValueError:
        return f"content is not JSON: {text[:80]!r}"
    if not isinstance(value, dict):
        return "content is not a JSON object"
    if value.get("status") not in TOOL_STATUSES:
        return f"content status {value.get('status')!r} is not one of {', '.join(TOOL_STATUSES)}"
    return None
