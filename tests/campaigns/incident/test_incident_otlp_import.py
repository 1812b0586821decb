"""`incident import --otlp`: OTLP JSON traces of GenAI spans become scenarios.

The first traces are real SDK output: reference_engine/telemetry.py with the `otlp_file`
exporter, driven in-process as two workers would drive it (the first dies inside the refund
call, the second finishes the run). The others are hand-made OTLP JSON with attributes
missing, ids in base64, lines that are no JSON, repeats without worker identities: each
gives a scenario with notes, or a CrashcertError that says what is missing, never a crash.
"""

from __future__ import annotations

import base64
import itertools
import json
import pathlib
from typing import Any

import click.testing
import pytest
import yaml

from harness import errors
from harness.cli import main
from harness.incident import otlp, trace_incident
from harness.scenario import schema

telemetry = pytest.importorskip("reference_engine.telemetry_sdk").telemetry

RUN_ID = "0b3e7c41-0000-4000-8000-0000000000aa"
KEY = "refund-k1"
SYSTEM = "You are a support agent."
USER = f"[crashcert-run: {KEY}] Order ord-{KEY} arrived broken. Please refund it."
LOOKUP = {"order_id": "ord-1", "refundable": True}
REFUND = {"refund_id": "rf-1", "status": "refunded"}
DECLARATIONS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up.",
            "parameters": {"type": "object"},
        },
        "replay": "replayable",
        "effect": "read",
    },
    {
        "type": "function",
        "function": {
            "name": "refund_order",
            "description": "Refund.",
            "parameters": {"type": "object"},
        },
        "replay": "non_replayable",
        "effect": "write",
        "queryable": True,
    },
]


def _assistant(call_id: str, name: str) -> dict[str, Any]:
    arguments = json.dumps({"order_id": f"ord-{KEY}"})
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def _tool_message(call_id: str, status: str, result: Any = None) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": json.dumps({"status": status, "result": result}),
    }


TURN_0 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
TURN_1 = [
    *TURN_0,
    _assistant("call_lookup", "lookup_order"),
    _tool_message("call_lookup", "ok", LOOKUP),
]
TURN_2 = [
    *TURN_1,
    _assistant("call_refund", "refund_order"),
    _tool_message("call_refund", "ok", REFUND),
]


def traced(path: pathlib.Path, worker: str, *, content: bool = True) -> telemetry.Tracer:
    env = {
        "OTEL_TRACES_EXPORTER": "otlp_file",
        telemetry.FILE_VARIABLE: str(path),
        telemetry.CONTENT_VARIABLE: "SPAN_ONLY" if content else "NO_CONTENT",
    }
    return telemetry.from_env(worker_id=worker, model="scripted", redact=False, env=env)


def chat(
    tracer: telemetry.Tracer, history: list[dict[str, Any]], answer: dict[str, Any], usage: int
) -> None:
    with tracer.chat(RUN_ID, history, DECLARATIONS) as span:
        span.answered(answer, {"prompt_tokens": usage, "completion_tokens": 10})


def tool(tracer: telemetry.Tracer, call_id: str, name: str, state: str, result: Any) -> None:
    with tracer.tool(RUN_ID, call_id, name, json.dumps({"order_id": f"ord-{KEY}"})) as span:
        span.settled(state, {"result": result} if state == "succeeded" else {"error": "no answer"})


def production_trace(path: pathlib.Path, *, content: bool = True) -> None:
    """Worker a: lookup, then the refund decision, then killed inside the refund call (its
    span never ends, so it is never written). Worker b: recovers the refund (asked by key,
    no span of its own) and answers."""
    first = traced(path, "worker-a", content=content)
    chat(first, TURN_0, _assistant("call_lookup", "lookup_order"), 220)
    tool(first, "call_lookup", "lookup_order", "succeeded", LOOKUP)
    chat(first, TURN_1, _assistant("call_refund", "refund_order"), 300)
    first.close()
    second = traced(path, "worker-b", content=content)
    chat(second, TURN_2, {"role": "assistant", "content": f"Refunded ord-{KEY}."}, 380)
    second.close()


def imported(path: pathlib.Path, *args: str) -> schema.Scenario:
    result = click.testing.CliRunner().invoke(
        main.main, ["incident", "import", "--otlp", str(path), *args]
    )
    assert result.exit_code == 0, result.output
    return schema.parse(yaml.safe_load(result.output), source="imported")


def test_sdk_trace_of_a_worker_killed_inside_a_tool_call(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "traces.jsonl"
    production_trace(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 4  # one TracesData per ended span, as the file exporter writes
    span = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16  # hex, the OTLP/JSON rule

    scenario = imported(path)

    assert scenario.faults == ["kill@tool.started#2"]
    assert scenario.variants == [["kill@tool.returned#2"]]
    assert "worker worker-a" in scenario.note and "call_refund" in scenario.note
    assert scenario.input.system == SYSTEM
    assert scenario.input.user == "Order ord-{run} arrived broken. Please refund it."
    assert [[c.id for c in turn.tool_calls] for turn in scenario.turns] == [
        ["call_lookup"],
        ["call_refund"],
        [],
    ]
    assert scenario.turns[0].tool_calls[0].arguments == {"order_id": "ord-{run}"}
    assert scenario.turns[-1].content == "Refunded ord-{run}."
    assert [turn.usage.prompt_tokens for turn in scenario.turns] == [220, 300, 380]
    lookup, refund = scenario.tools
    assert (lookup.name, lookup.replay, lookup.behaviour.result) == (
        "lookup_order",
        "replayable",
        LOOKUP,
    )
    assert (refund.replay, refund.queryable, refund.behaviour.result) == (
        "non_replayable",
        True,
        REFUND,
    )
    assert scenario.expect.status == "succeeded"


def test_without_content_the_trace_still_gives_a_scenario(tmp_path: pathlib.Path) -> None:
    """Content capture off (the SDK default): no messages, no results, no definitions."""
    path = tmp_path / "traces.jsonl"
    production_trace(path, content=False)

    scenario = imported(path)

    # The lookup's tool span gives its call; the refund decision is nowhere: the turns that
    # can be rebuilt are, and the note says what was assumed.
    assert scenario.turns[0].tool_calls[0].id == "call_lookup"
    assert scenario.turns[-1].content == trace_incident.MISSING_REPLY
    assert "without gen_ai.output.messages" in scenario.note
    assert "without gen_ai.input.messages" in scenario.note
    assert "the strictest reading" in scenario.note
    assert scenario.input.user == trace_incident.MISSING_USER


# -- hand-made OTLP JSON ----------------------------------------------------------------

_ids = itertools.count(1)


def value(item: Any) -> dict[str, Any]:
    if isinstance(item, bool):
        return {"boolValue": item}
    if isinstance(item, int):
        return {"intValue": str(item)}
    if isinstance(item, list):
        return {"arrayValue": {"values": [value(x) for x in item]}}
    if isinstance(item, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": value(v)} for k, v in item.items()]}}
    return {"stringValue": str(item)}


def span(
    name: str, attributes: dict[str, Any], *, error: bool = False, trace: str = "ab" * 16
) -> dict[str, Any]:
    number = next(_ids)
    return {
        "traceId": trace,
        "spanId": f"{number:016x}",
        "name": name,
        "startTimeUnixNano": str(1_000_000 * number),
        "endTimeUnixNano": str(1_000_000 * number + 500),
        "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()],
        "status": {"code": 2, "message": "boom"} if error else {},
    }


def document(*groups: tuple[dict[str, Any], list[dict[str, Any]]]) -> str:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": k, "value": value(v)} for k, v in resource.items()]
                    },
                    "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}],
                }
                for resource, spans in groups
            ]
        }
    )


def chat_span(
    history: list[dict[str, Any]] | None, output: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", **extra}
    if history is not None:
        attributes["gen_ai.input.messages"] = json.dumps(telemetry.messages(history))
    if output is not None:
        attributes["gen_ai.output.messages"] = json.dumps(telemetry.output(output, "stop"))
    return span("chat m", attributes)


def tool_span(
    call_id: str | None, name: str | None, *, error: str | None = None, **extra: Any
) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", **extra}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    if name is not None:
        attributes["gen_ai.tool.name"] = name
    if error is not None:
        attributes["error.type"] = error
    return span(f"execute_tool {name}", attributes, error=error is not None)


def scenario_of(text: str, **options: Any) -> schema.Scenario:
    return trace_incident.scenario_from_spans(otlp.parse(text), **options)


REPLY = {"role": "assistant", "content": "done"}


def test_a_model_call_repeated_for_one_turn_without_worker_names() -> None:
    text = document(
        (
            {},  # no service.instance.id, no process.pid
            [
                chat_span(TURN_0, _assistant("call_lookup", "lookup_order")),
                chat_span(TURN_0, _assistant("call_lookup", "lookup_order")),
                tool_span("call_lookup", "lookup_order"),
                chat_span(TURN_1, REPLY),
            ],
        )
    )
    scenario = scenario_of(text)
    assert scenario.faults == ["kill@model.returned#1"]
    assert scenario.variants == [["kill@tools.pending#1"]]
    assert "no span names its worker" in scenario.note
    assert len(scenario.turns) == 2


def test_a_worker_restarted_under_the_same_id_gets_the_param() -> None:
    first = (
        {"service.instance.id": "w-1", "process.pid": 10},
        [chat_span(TURN_0, _assistant("call_lookup", "lookup_order"))],
    )
    second = (
        {"service.instance.id": "w-1", "process.pid": 11},
        [
            chat_span(TURN_0, _assistant("call_lookup", "lookup_order")),
            tool_span("call_lookup", "lookup_order"),
            chat_span(TURN_1, REPLY),
        ],
    )
    scenario = scenario_of(document(first, second))
    assert scenario.faults == ["kill@model.returned#1?same_worker_id=true"]


def test_a_tool_call_run_again_by_the_next_worker() -> None:
    first = (
        {"service.instance.id": "w-1"},
        [
            chat_span(TURN_0, _assistant("call_lookup", "lookup_order")),
            tool_span("call_lookup", "lookup_order"),
        ],
    )
    second = (
        {"service.instance.id": "w-2"},
        [tool_span("call_lookup", "lookup_order"), chat_span(TURN_1, REPLY)],
    )
    scenario = scenario_of(document(first, second))
    assert scenario.faults == ["kill@tool.returned#1"]
    assert scenario.variants == [["kill@tool.settled#1"]]


def test_a_failed_tool_span_repeated_by_its_worker_is_a_scripted_failure() -> None:
    worker = {"service.instance.id": "w-1"}
    spans = [
        chat_span(TURN_0, _assistant("call_lookup", "lookup_order")),
        tool_span("call_lookup", "lookup_order", error="timeout"),
        tool_span("call_lookup", "lookup_order", error="503"),
        tool_span("call_lookup", "lookup_order", **{"gen_ai.tool.call.result": json.dumps(LOOKUP)}),
        chat_span(TURN_1, REPLY),
    ]
    scenario = scenario_of(document((worker, spans)))
    behaviour = scenario.tools[0].behaviour
    assert (behaviour.effect_then_fail, behaviour.fail_first) == (1, 1)
    assert behaviour.result == LOOKUP
    assert scenario.faults == [] and "replays without a fault" in scenario.note
    assert "failed (timeout) and ran again: replayed as effect_then_fail" in scenario.note


def test_missing_ids_names_and_unreadable_lines_become_notes() -> None:
    good = document(
        (
            {"service.instance.id": "w-1"},
            [
                chat_span(TURN_0, None),  # no output: its calls come from the tool span
                tool_span("call_lookup", None),  # no tool name
                tool_span(None, "lookup_order"),  # no call id
                chat_span(None, REPLY),  # no history
            ],
        )
    )
    text = "not json at all\n" + good.replace("\n", " ") + "\n{}\n"
    scenario = scenario_of(text)
    note = scenario.note
    assert "line 1 is not JSON" in note and "without resourceSpans" in note
    assert "without gen_ai.tool.name" in note and "without gen_ai.tool.call.id" in note
    assert "without gen_ai.output.messages" in note and "without gen_ai.input.messages" in note
    assert scenario.turns[-1].content == "done"


def test_base64_ids_and_enum_names_as_protobuf_writes_them() -> None:
    raw = span("chat m", {"gen_ai.operation.name": "chat"})
    raw["traceId"] = base64.b64encode(bytes.fromhex("ab" * 16)).decode()
    raw["spanId"] = base64.b64encode(bytes.fromhex("01" * 8)).decode()
    raw["status"] = {"code": "STATUS_CODE_ERROR"}
    [read] = otlp.parse(document(({}, [raw]))).spans
    assert (read.trace_id, read.span_id, read.status) == ("ab" * 16, "01" * 8, "error")


def test_traces_that_cannot_make_a_scenario_say_why() -> None:
    cases: list[tuple[str, str]] = [
        ("", "holds no span"),
        ("{}\n", "no readable span"),
        (document(({}, [span("GET /health", {})])), "no GenAI span"),
        (document(({}, [tool_span("c1", "lookup_order")])), "no chat span"),
        (
            document(
                (
                    {},
                    [
                        chat_span(TURN_0, REPLY, trace="ab" * 16),
                        {**chat_span(TURN_0, REPLY), "traceId": "cd" * 16},
                    ],
                )
            ),
            "several runs; choose one with --run",
        ),
    ]
    for text, message in cases:
        with pytest.raises(errors.CrashcertError, match=message):
            scenario_of(text)


def test_run_chooses_among_several(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(
        document(
            (
                {},
                [
                    chat_span(TURN_0, REPLY, **{"gen_ai.conversation.id": "run-a"}),
                    chat_span(
                        TURN_0,
                        {"role": "assistant", "content": "other"},
                        **{"gen_ai.conversation.id": "run-b"},
                    ),
                ],
            )
        )
    )
    assert imported(path, "--run", "run-b").turns[0].content == "other"


def test_no_attribute_missing_anywhere_crashes_the_import(tmp_path: pathlib.Path) -> None:
    """Take the SDK's trace and drop each attribute of each span in turn: every import
    gives a scenario or a CrashcertError."""
    path = tmp_path / "traces.jsonl"
    production_trace(path)
    documents = [json.loads(line) for line in path.read_text().splitlines()]

    def spans_of(item: dict[str, Any]) -> list[dict[str, Any]]:
        return item["resourceSpans"][0]["scopeSpans"][0]["spans"]  # type: ignore[no-any-return]

    tried = 0
    for index, doc in enumerate(documents):
        for position in range(len(spans_of(doc)[0]["attributes"])):
            changed = json.loads(json.dumps(documents))
            del spans_of(changed[index])[0]["attributes"][position]
            text = "\n".join(json.dumps(item) for item in changed)
            try:
                scenario_of(text)
            except errors.CrashcertError:
                pass
            tried += 1
    assert tried > 20
