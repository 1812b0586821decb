"""One run's GenAI spans, read into steps in the order they happened (`incident import`).

A step is a chat span (a model call: the turn it answered, its output, its usage, the
history it was sent) or an execute_tool span (one tool call), with the worker that emitted
it and the boundary hits counted up to it, as the harness counts them in a trial: every chat
span opens a model call (`model.pending`) and, answered, returns one (`model.returned`); the
first answer of a turn is its decision (`tools.pending` or `reply.ready`); every tool span
starts and returns a call (`tool.started`, `tool.returned`). Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness import errors
from harness.incident import genai, otlp

COUNTED = ("model.pending", "model.returned", "tools.pending", "reply.ready")
TOOL_COUNTED = ("tool.started", "tool.returned")


@dataclasses.dataclass
class Step:
    span: otlp.Span
    kind: str  # chat | tool
    turn: int | None = None  # chat: assistant messages in its history
    answer: genai.Answer | None = None  # chat: its output, when recorded
    usage: tuple[int, int] | None = None  # chat: input and output tokens
    history: list[dict[str, Any]] | None = None  # chat: its input messages
    call: genai.Call | None = None  # tool
    counts: dict[str, int] = dataclasses.field(default_factory=dict)  # hits up to its end

    @property
    def worker(self) -> str | None:
        return self.span.worker

    @property
    def failed(self) -> bool:
        return self.span.failed


def select_run(spans: list[otlp.Span], run: str | None) -> tuple[list[otlp.Span], str]:
    """The GenAI spans of one run: by gen_ai.conversation.id, else by trace id."""
    groups: dict[str, list[otlp.Span]] = {}
    for span in spans:
        if span.operation not in (genai.CHAT, genai.EXECUTE_TOOL):
            continue
        key = span.text(genai.CONVERSATION) or span.trace_id
        groups.setdefault(key, []).append(span)
    if run is not None:
        chosen = [s for key, group in groups.items() for s in group if run in (key, s.trace_id)]
        if not chosen:
            raise errors.CrashcertError(f"no chat or execute_tool span of run {run!r} in the trace")
        return chosen, run
    if not groups:
        raise errors.CrashcertError(
            "the trace holds no GenAI span (gen_ai.operation.name chat or execute_tool)"
        )
    if len(groups) > 1:
        listed = ", ".join(f"{key} ({len(group)} spans)" for key, group in groups.items())
        raise errors.CrashcertError(
            f"the trace holds several runs; choose one with --run: {listed}"
        )
    [(key, group)] = groups.items()
    return group, key


def read(spans: list[otlp.Span], notes: list[str]) -> list[Step]:
    """The spans in the order they started, read, with running hit counts."""
    counts = dict.fromkeys((*COUNTED, *TOOL_COUNTED), 0)
    decided: set[int] = set()
    steps: list[Step] = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if span.operation == genai.CHAT:
            step = _chat(span)
            counts["model.pending"] += 1
            if not span.failed:
                counts["model.returned"] += 1
            # a turn's first answer is its decision; unread (no output recorded), a guess
            turn = step.turn if step.turn is not None else -counts["model.pending"]
            if not span.failed and turn not in decided:
                decided.add(turn)
                reply = step.answer is not None and not step.answer.calls
                counts["reply.ready" if reply else "tools.pending"] += 1
        else:
            step = _tool(span)
            counts["tool.started"] += 1
            counts["tool.returned"] += 1
        step.counts = dict(counts)
        steps.append(step)
    _note_missing(steps, notes)
    return steps


def _chat(span: otlp.Span) -> Step:
    history = genai.messages(span.structured(genai.INPUT))
    output = genai.messages(span.structured(genai.OUTPUT))
    answer = genai.answer(output[0]) if output and not span.failed else None
    inputs, outputs = span.number(genai.INPUT_TOKENS), span.number(genai.OUTPUT_TOKENS)
    usage = None if inputs is None and outputs is None else (inputs or 0, outputs or 0)
    turn = None
    if history is not None:
        turn = sum(1 for message in history if message.get("role") == "assistant")
    return Step(span=span, kind="chat", turn=turn, answer=answer, usage=usage, history=history)


def _tool(span: otlp.Span) -> Step:
    call = genai.Call(
        id=(span.text(genai.CALL_ID) or "").strip(),
        name=span.text(genai.TOOL_NAME) or "",
        arguments=genai.arguments(span.structured(genai.CALL_ARGUMENTS)),
    )
    return Step(span=span, kind="tool", call=call)


def _note_missing(steps: list[Step], notes: list[str]) -> None:
    """What the spans lack, once each: the scenario's note says what was assumed."""
    chats = [step for step in steps if step.kind == "chat"]
    tools = [step for step in steps if step.kind == "tool"]
    missing = {
        genai.INPUT: sum(1 for step in chats if step.history is None),
        genai.OUTPUT: sum(1 for step in chats if step.answer is None and not step.failed),
        "gen_ai.usage.*": sum(1 for step in chats if step.usage is None and not step.failed),
        genai.TOOL_NAME: sum(1 for step in tools if step.call and not step.call.name),
        genai.CALL_ID: sum(1 for step in tools if step.call and not step.call.id),
    }
    for attribute, count in missing.items():
        if count:
            kind = (
                "chat"
                if attribute.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.u"))
                else "execute_tool"
            )
            notes.append(f"{count} {kind} span(s) without {attribute}")
    if steps and not any(step.worker for step in steps):
        notes.append(
            "no span names its worker (resource service.instance.id or process.pid): worker "
            "restarts are seen only where a model call or a tool call is repeated"
        )


def turn_calls(steps: list[Step]) -> dict[str, tuple[int, list[genai.Call]]]:
    """Tool call id -> (its turn, the calls the model decided in that turn), from the chat
    outputs and the histories later chat spans carried."""
    found: dict[str, tuple[int, list[genai.Call]]] = {}
    for step in steps:
        answers: list[tuple[int, genai.Answer]] = []
        if step.answer is not None and step.turn is not None:
            answers.append((step.turn, step.answer))
        answers += list(enumerate(genai.assistant_turns(step.history or [])))
        for turn, answer in answers:
            for call in answer.calls:
                found.setdefault(call.id, (turn, answer.calls))
    return found
