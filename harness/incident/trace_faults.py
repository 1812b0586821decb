"""The faults a run's trace shows (`incident import --otlp`).

A worker that stops emitting spans while another goes on with the run died after its last
span (or stalled past its lease: the same to a replay). Where exactly, the successor's spans
tell: it asks the model again for the same turn (the decision was not durable yet), runs the
same tool call again (its outcome was not durable), runs the next call, or only learns the
outcome of a call the dead worker never finished (that call was started). The fault is a
kill at that point, numbered as the harness counts its hits (trace_steps.py); the readings
the trace cannot rule out are alternatives, replayed as variants. Without worker identities
on the spans, a repeated model turn or tool call is the only sign of a restart. A worker
restarted under the same `service.instance.id` (another pid) gets `same_worker_id=true`.
Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.incident import genai, incident, trace_steps, variants

Alternative = variants.Alternative


@dataclasses.dataclass(frozen=True)
class Death:
    """Where a worker died, and what else the trace allows."""

    fault: str
    why: str
    alternatives: list[Alternative]


def infer(steps: list[trace_steps.Step]) -> incident.Inference:
    calls_of = trace_steps.turn_calls(steps)
    faults: list[str] = []
    options: list[list[Alternative]] = []
    notes: list[str] = []

    def add(death: Death, *, same_id: bool) -> None:
        faults.append(_same_id(death.fault) if same_id else death.fault)
        alternatives = [
            Alternative(_same_id(alt.fault) if same_id else alt.fault, alt.why)
            for alt in death.alternatives
        ]
        options.append(alternatives)
        notes.append(f"{faults[-1]}: {death.why}")

    for index in range(1, len(steps)):
        dead, heir = steps[index - 1], steps[index]
        if not dead.worker or not heir.worker or dead.worker == heir.worker:
            continue
        if any(step.worker == dead.worker for step in steps[index:]):
            continue  # both went on: two workers at once, not a death
        later = [step for step in steps[index:] if step.worker != dead.worker]
        found = _death(dead, later, calls_of)
        if isinstance(found, str):
            notes.append(found)
            continue
        same_id = _instance(dead.worker) == _instance(heir.worker)
        add(found, same_id=same_id)
    for death in _repeats(steps, notes):
        add(death, same_id=False)
    if not faults:
        notes.append("the trace shows no worker dying: the incident replays without a fault")
    found_variants = variants.combine(faults, options)
    return incident.Inference(
        faults=faults,
        notes=notes + found_variants.notes,
        variants=found_variants.plans,
        source="From the run's OpenTelemetry trace:",
    )


def _n(occurrence: int) -> int:
    """An occurrence of at least 1: a count the trace could not read starts there."""
    return max(1, occurrence)


def _instance(worker: str) -> str:
    return worker.split("/", 1)[0]


def _same_id(fault: str) -> str:
    return f"{fault}?same_worker_id=true" if fault.startswith("kill@") else fault


def _death(
    dead: trace_steps.Step,
    later: list[trace_steps.Step],
    calls_of: dict[str, tuple[int, list[genai.Call]]],
) -> Death | str:
    """Where the worker of `dead` (its last span) died, from what `later` spans show."""
    who = f"worker {dead.worker} emitted nothing after its {_what(dead)}"
    if dead.failed and dead.kind == "chat":
        return f"{who}, a failed model call: it gave the run back (no fault replayed)"
    executed = {step.call.id for step in later if step.call is not None and step.call.id}
    told: dict[str, Any] = {}
    for step in later:
        told.update(genai.responses(step.history or []))
    count = dead.counts
    if dead.kind == "chat":
        if any(step.kind == "chat" and step.turn == dead.turn for step in later):
            return _model_again(dead, who)
        calls = dead.answer.calls if dead.answer else list(_calls_of_turn(dead.turn, calls_of))
        if not calls:
            ready = count["reply.ready"]
            return Death(
                f"kill@reply.ready#{_n(ready)}",
                f"{who} (the final reply) and another worker finished the run",
                [
                    Alternative(
                        f"kill@reply.sending#{_n(ready)}", "the reply may have been sending"
                    ),
                    Alternative(
                        f"kill@reply.sent#{_n(ready)}", "the sink may have taken the reply"
                    ),
                ],
            )
        return _before_call(calls[0], count, who, executed, told, decided=True)
    call = dead.call
    assert call is not None
    returned = count["tool.returned"]
    if call.id and call.id in executed:
        return Death(
            f"kill@tool.returned#{_n(returned)}",
            f"{who} and another worker ran call {call.id} again: its outcome was not durable",
            [
                Alternative(
                    f"kill@tool.settled#{_n(returned)}",
                    "the outcome was durable and the call ran again all the same",
                )
            ],
        )
    _, calls = calls_of.get(call.id, (0, []))
    ids = [c.id for c in calls]
    following = calls[ids.index(call.id) + 1 :] if call.id in ids else []
    if following:
        return _before_call(following[0], count, who, executed, told, decided=False)
    state, _ = genai.response_state(told[call.id]) if call.id in told else ("", None)
    if state == "outcome_unknown":
        return Death(
            f"kill@tool.returned#{_n(returned)}",
            f"{who}, and the model was later told call {call.id}'s outcome is unknown",
            [],
        )
    return Death(
        f"kill@tool.settled#{_n(returned)}",
        f"{who}; call {call.id} was its last, and another worker went on",
        [
            Alternative(
                f"kill@tool.returned#{_n(returned)}",
                "the outcome may not have been durable (a tool asked by key tells the successor)",
            )
        ],
    )


def _before_call(
    call: genai.Call,
    count: dict[str, int],
    who: str,
    executed: set[str],
    told: dict[str, Any],
    *,
    decided: bool,
) -> Death:
    """The worker died before `call` ended: before it started, or inside it."""
    started, returned = count["tool.started"] + 1, count["tool.returned"] + 1
    before = (
        f"kill@tools.pending#{_n(count['tools.pending'])}"
        if decided
        else f"kill@tool.settled#{_n(count['tool.returned'])}"
    )
    inside = Alternative(
        f"kill@tool.started#{_n(started)}", f"call {call.id} may have been marked started"
    )
    effect = Alternative(
        f"kill@tool.returned#{_n(returned)}", f"call {call.id}'s effect may have happened"
    )
    if call.id in executed:
        return Death(before, f"{who}; another worker ran call {call.id}", [inside, effect])
    if call.id in told:
        return Death(
            inside.fault,
            f"{who}; call {call.id} has no span of its own, and another worker told the model its "
            "outcome without running it: the call was started and never finished",
            [effect],
        )
    return Death(before, f"{who}; call {call.id} shows no span", [inside, effect])


def _model_again(dead: trace_steps.Step, who: str) -> Death:
    count = dead.counts
    point = "tools.pending" if dead.answer is None or dead.answer.calls else "reply.ready"
    return Death(
        f"kill@model.returned#{_n(count['model.returned'])}",
        f"{who} and another worker asked the model again for turn {dead.turn}: the decision "
        "was not durable",
        [
            Alternative(
                f"kill@{point}#{_n(count[point])}",
                "the decision was durable and asked for again all the same",
            )
        ],
    )


def _calls_of_turn(
    turn: int | None, calls_of: dict[str, tuple[int, list[genai.Call]]]
) -> list[genai.Call]:
    for found_turn, calls in calls_of.values():
        if found_turn == turn:
            return calls
    return []


def _repeats(steps: list[trace_steps.Step], notes: list[str]) -> list[Death]:
    """Restarts seen only as repeats, where the spans do not name their workers; and
    repeats by one and the same worker, which no crash explains."""
    deaths: list[Death] = []
    seen_turns: dict[int, trace_steps.Step] = {}
    seen_calls: dict[str, trace_steps.Step] = {}
    for step in steps:
        if step.kind == "chat" and step.turn is not None:
            first = seen_turns.get(step.turn)
            if first is not None and not first.failed and first.answer is not None:
                if first.worker is None or step.worker is None:
                    deaths.append(_model_again(first, f"a model call of turn {first.turn}"))
                elif first.worker == step.worker:
                    notes.append(
                        f"worker {step.worker} asked the model twice for turn {step.turn} "
                        "without a restart"
                    )
            seen_turns.setdefault(step.turn, step)
        elif step.call is not None and step.call.id:
            first = seen_calls.get(step.call.id)
            if first is not None and not first.failed:
                if first.worker is None or step.worker is None:
                    returned = first.counts["tool.returned"]
                    deaths.append(
                        Death(
                            f"kill@tool.returned#{_n(returned)}",
                            f"call {step.call.id} ran twice: its outcome was not durable",
                            [
                                Alternative(
                                    f"kill@tool.settled#{_n(returned)}",
                                    "the outcome was durable and the call ran again all the same",
                                )
                            ],
                        )
                    )
                elif first.worker == step.worker:
                    notes.append(
                        f"worker {step.worker} ran call {step.call.id} twice without a restart"
                    )
            seen_calls.setdefault(step.call.id, step)
    return deaths


def _what(step: trace_steps.Step) -> str:
    if step.kind == "chat":
        return f"model call of turn {step.turn if step.turn is not None else '?'}"
    call = step.call
    return f"tool call {call.id or call.name}" if call else "tool call"
