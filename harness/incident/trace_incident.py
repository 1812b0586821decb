"""One run's OpenTelemetry GenAI trace as an incident scenario (`incident import --otlp`).

The OTLP file is read by otlp.py, its spans by trace_steps.py, the faults by
trace_faults.py; here the scenario is put together: the input from the first chat span's
history, one turn per model decision (the chat output, else the assistant message a later
chat span carried, else the tool spans that followed it), the tools from
`gen_ai.tool.definitions` and the tool spans, their results from
`gen_ai.tool.call.result` or from the tool responses later chat spans carried, and a tool
that failed and was run again by the same worker as a scripted failure. Whatever the trace
lacks is assumed the strictest way and said in the note. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from harness import errors
from harness.incident import genai, incident, otlp, trace_faults, trace_steps
from harness.scenario import schema

MARKER_KEY = re.compile(r"\[crashcert-run: (?P<key>[^\]]*)\]")
UNSAFE = re.compile(r"[^a-zA-Z0-9_-]+")
MISSING_USER = "(the user message is not in the trace)"
MISSING_REPLY = "(the final reply is not in the trace)"
# A trace shows no budgets: generous ones, so that a replay ends by its script.
MIN_ITERATIONS, MIN_TOOL_CALLS, MIN_TOKENS = 8, 8, 100_000
# error.type values that say a request was refused before anything happened.
NOT_APPLIED = ("503", "unavailable", "not_applied")
POLICY = ("replay", "effect", "honours_idempotency_key", "queryable", "requires_approval")
Turn = tuple[genai.Answer, tuple[int, int] | None]


def scenario_from_spans(
    trace: otlp.Trace, *, run: str | None = None, name: str | None = None, source: str = ""
) -> schema.Scenario:
    spans, run_id = trace_steps.select_run(trace.spans, run)
    notes = list(trace.problems)
    steps = trace_steps.read(spans, notes)
    chats = [step for step in steps if step.kind == "chat"]
    history = next((step.history for step in chats if step.history), None)
    run_key = _run_key(history)
    turns = _turns(steps, notes)
    inference = trace_faults.infer(steps)
    tools = _tools(steps, [answer for answer, _ in turns], run_key, notes)
    calls = sum(len(answer.calls) for answer, _ in turns)
    tokens = sum(sum(step.usage or (0, 0)) for step in chats)
    notes.append(
        "a trace shows no budgets nor whether the reply sink can be asked by key: generous "
        "budgets and a queryable sink are written (edit them to match production)"
    )
    data = {
        "name": name or _name(run_id),
        "description": f"Replay of run {run_id}" + (f" from {source}" if source else "") + ".",
        "input": _input(history, chats, run_key, notes),
        "budgets": {
            "iterations": max(MIN_ITERATIONS, len(chats) + len(turns) + 2),
            "tool_calls": max(MIN_TOOL_CALLS, 2 * calls + 2),
            "tokens": max(MIN_TOKENS, 4 * tokens),
        },
        "tools": tools,
        "turns": _script(turns, run_key, notes),
        "sink": {"queryable": True},
        "expect": {"status": "succeeded"},
        "faults": inference.faults,
        "variants": inference.variants,
        "note": " ".join(
            [inference.source, *(item.rstrip(".") + "." for item in inference.notes + notes)]
        ),
    }
    return schema.parse(data, source=f"trace of run {run_id}")


# -- input -------------------------------------------------------------------------------


def _run_key(history: list[dict[str, Any]] | None) -> str:
    """The run key of the harness's marker in the first user message (a run traced while
    the crashcert world served it); '' when there is none."""
    for message in history or []:
        if message.get("role") == "user":
            found = MARKER_KEY.search(genai.text_of(message) or "")
            return found["key"] if found else ""
    return ""


def _input(
    history: list[dict[str, Any]] | None,
    chats: list[trace_steps.Step],
    run_key: str,
    notes: list[str],
) -> dict[str, Any]:
    messages = history or []
    system = next((genai.text_of(m) for m in messages if m.get("role") == "system"), None)
    if system is None:
        system = next(
            (
                genai.system_text(s.span.structured(genai.SYSTEM))
                for s in chats
                if s.span.attributes.get(genai.SYSTEM)
            ),
            None,
        )
    user = next((genai.text_of(m) for m in messages if m.get("role") == "user"), None)
    if user is None:
        notes.append("the first user message is not in the trace: a placeholder is replayed")
        user = MISSING_USER
    spec = {"user": incident.templated(incident.MARKER.sub(" ", user).strip(), run_key)}
    if system is not None:
        spec["system"] = system
    return spec


# -- turns -------------------------------------------------------------------------------


def _turns(steps: list[trace_steps.Step], notes: list[str]) -> list[Turn]:
    """One answer per turn: the latest chat output for it, else the assistant message a
    later chat span was sent, else the tool spans that followed its chat span. The script
    is the turns known from the first on; a turn the trace does not show ends it with a
    placeholder reply (a replay of what is known, said in the note)."""
    chats = [step for step in steps if step.kind == "chat"]
    if not chats:
        raise errors.CrashcertError(
            "the run's trace holds no chat span: no model decision to replay"
        )
    if all(step.turn is None for step in chats):
        notes.append(
            "each chat span is taken as the next turn: a repeated model call cannot be told apart"
        )
    found: dict[int, Turn] = {}
    turn = -1
    for step in chats:
        # a span without a history follows the one before it
        turn = step.turn if step.turn is not None else turn + 1
        if step.failed:
            continue
        if step.answer is not None:
            found[turn] = (step.answer, step.usage)
        elif turn not in found and (rebuilt := _from_tool_spans(steps, step)) is not None:
            found[turn] = (rebuilt, step.usage)
            notes.append(
                f"turn {turn}: its tool calls are read from the execute_tool spans after it"
            )
    for step in chats:
        for number, answer in enumerate(genai.assistant_turns(step.history or [])):
            found.setdefault(number, (answer, None))
    turns: list[Turn] = []
    while len(turns) in found:
        answer, usage = found[len(turns)]
        turns.append((answer, usage))
        if not answer.calls:
            return turns  # the reply ends the run
    last = max(turn, max(found, default=-1))
    unknown = [str(number) for number in range(len(turns), last + 1) if number not in found]
    ends = f"after turn {len(turns) - 1}" if turns else "at once"
    if unknown:
        notes.append(
            f"turn(s) {', '.join(unknown)}: neither the model output nor the tool calls are "
            f"in the trace (content capture off?): the script ends {ends} with a placeholder "
            "reply"
        )
    else:
        notes.append(
            f"the trace ends before a final reply: the script ends {ends} with a placeholder"
        )
    turns.append((genai.Answer(calls=[], content=None), None))
    return turns


def _from_tool_spans(steps: list[trace_steps.Step], chat: trace_steps.Step) -> genai.Answer | None:
    """The calls of the execute_tool spans its worker emitted after `chat`, up to its next
    chat span."""
    calls: list[genai.Call] = []
    for step in steps[steps.index(chat) + 1 :]:
        if step.worker != chat.worker:
            continue
        if step.kind == "chat":
            break
        if step.call is not None and all(step.call.id != call.id for call in calls):
            calls.append(step.call)
    return genai.Answer(calls=calls, content=None) if calls else None


def _script(turns: list[Turn], run_key: str, notes: list[str]) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, (answer, usage) in enumerate(turns):
        prompt, completion = usage or (0, 0)
        turn: dict[str, Any] = {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
        if answer.calls:
            turn["tool_calls"] = []
            for number, call in enumerate(answer.calls):
                call_id = _safe(call.id) or f"call_{index}_{number}"
                while call_id in seen:
                    call_id = f"{call_id}_{index}"[-64:]
                seen.add(call_id)
                if call_id != call.id:
                    notes.append(f"tool call id {call.id!r} is replayed as {call_id!r}")
                turn["tool_calls"].append(
                    {
                        "id": call_id,
                        "name": _safe(call.name) or "unnamed_tool",
                        "arguments": incident.templated(call.arguments, run_key),
                    }
                )
        else:
            if answer.content is None:
                notes.append(
                    f"turn {index}: the final reply is not in the trace; a placeholder is replayed"
                )
            turn["content"] = incident.templated(answer.content or MISSING_REPLY, run_key)
        script.append(turn)
    return script


# -- tools -------------------------------------------------------------------------------


def _tools(
    steps: list[trace_steps.Step], answers: list[genai.Answer], run_key: str, notes: list[str]
) -> list[dict[str, Any]]:
    definitions: dict[str, dict[str, Any]] = {}
    for step in steps:
        for named, definition in genai.definitions(step.span.structured(genai.DEFINITIONS)).items():
            definitions.setdefault(named, definition)
    names = [_safe(call.name) or "unnamed_tool" for answer in answers for call in answer.calls]
    names += [_safe(step.call.name) for step in steps if step.call is not None and step.call.name]
    results = _results(steps, answers)
    failures = _failures(steps, notes)
    tools = []
    for name in dict.fromkeys(names):
        definition = next((d for named, d in definitions.items() if _safe(named) == name), {})
        tool: dict[str, Any] = {
            "name": name,
            "description": str(definition.get("description") or ""),
            "parameters": definition.get("parameters")
            if isinstance(definition.get("parameters"), dict)
            else {"type": "object", "properties": {}},
            "replay": "non_replayable",
            "effect": "write",
        }
        policy = {key: definition[key] for key in POLICY if key in definition}
        tool.update(policy)
        if "replay" not in policy:
            notes.append(
                f"tool {name}: its replay policy is not in the trace; taken as a "
                "non_replayable write, not queryable (the strictest reading)"
            )
        behaviour: dict[str, Any] = dict(failures.get(name, {}))
        if name in results:
            behaviour["result"] = incident.templated(results[name], run_key)
        else:
            notes.append(f"tool {name}: no result in the trace; the replay answers {{ok: true}}")
        tool["behaviour"] = behaviour
        tools.append(tool)
    return tools


def _results(steps: list[trace_steps.Step], answers: list[genai.Answer]) -> dict[str, Any]:
    """Tool name -> the first result it gave: its span's gen_ai.tool.call.result, else the
    response a later chat span carried."""
    results: dict[str, Any] = {}
    names = {call.id: _safe(call.name) for answer in answers for call in answer.calls}
    for step in steps:
        if step.call is not None and not step.failed:
            value = step.span.structured(genai.CALL_RESULT)
            if value is not None:
                results.setdefault(_safe(step.call.name) or names.get(step.call.id, ""), value)
        for call_id, response in genai.responses(step.history or []).items():
            state, value = genai.response_state(response)
            if state == "ok" and call_id in names:
                results.setdefault(names[call_id], value)
    return results


def _failures(steps: list[trace_steps.Step], notes: list[str]) -> dict[str, dict[str, int]]:
    """Tool name -> scripted failures: each failed span its own worker followed with the
    same call again. Refused (503, unavailable) replays as fail_first; anything else (a 500,
    a timeout, an unknown error) as effect_then_fail, the reading where the effect happened."""
    found: dict[str, dict[str, int]] = {}
    tools = [step for step in steps if step.call is not None and step.call.id]
    for index, step in enumerate(tools):
        assert step.call is not None
        if not step.failed:
            continue
        again = [
            s
            for s in tools[index + 1 :]
            if s.call and s.call.id == step.call.id and s.worker == step.worker
        ]
        if not again:
            continue
        kind = str(
            step.span.attributes.get(genai.ERROR_TYPE) or step.span.status_message or "error"
        )
        field = (
            "fail_first"
            if any(word in kind.lower() for word in NOT_APPLIED)
            else "effect_then_fail"
        )
        name = _safe(step.call.name)
        counts = found.setdefault(name, {})
        counts[field] = counts.get(field, 0) + 1
        notes.append(
            f"call {step.call.id} of {name} failed ({kind}) and ran again: replayed as {field}"
            + ("" if field == "fail_first" else " (if it was not applied, fail_first replays that)")
        )
    return found


def _safe(text: str) -> str:
    return UNSAFE.sub("_", text).strip("_")[:64]


def _name(run_id: str) -> str:
    return incident.NAME_ALLOWED.sub("-", f"incident-{run_id[:8]}".lower()).strip("-")[:64]
