"""The reference engine's OpenTelemetry spans (reference_engine/telemetry.py): off by
default, configured by the OTEL_* variables, GenAI attributes, content only when asked."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from reference_engine import errors, telemetry

pytest.importorskip("opentelemetry.sdk")

RUN = "1d2c3b4a-0000-4000-8000-000000000001"
TRANSCRIPT = [{"role": "user", "content": "refund ord-1"}]
TOOLS = [{"function": {"name": "refund", "parameters": {}}, "replay": "non_replayable"}]


def tracer(path: pathlib.Path, worker: str = "w-1", **env: str) -> telemetry.Tracer:
    settings = {"OTEL_TRACES_EXPORTER": "otlp_file", telemetry.FILE_VARIABLE: str(path), **env}
    return telemetry.from_env(worker_id=worker, model="m", redact=False, env=settings)


def spans(path: pathlib.Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(resource attributes, span) per span written, attributes as plain values."""
    found = []
    for line in path.read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            resource = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
            for scope in resource_spans["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {
                        a["key"]: next(iter(a["value"].values()))
                        for a in span.get("attributes", [])
                    }
                    found.append((resource, span))
    return found


def test_off_unless_an_exporter_is_named(tmp_path: pathlib.Path) -> None:
    for env in ({}, {"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_TRACES_EXPORTER": " , none"}):
        found = telemetry.from_env(worker_id="w", model="m", redact=False, env=env)
        assert type(found) is telemetry.Tracer
        with found.chat(RUN, TRANSCRIPT, TOOLS) as span:
            span.answered({"content": "x"}, {})


def test_misconfiguration_is_a_config_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.ConfigError, match=telemetry.FILE_VARIABLE):
        telemetry.from_env(
            worker_id="w", model="m", redact=False, env={"OTEL_TRACES_EXPORTER": "otlp_file"}
        )
    with pytest.raises(errors.ConfigError, match="unknown exporter 'jaeger'"):
        telemetry.from_env(
            worker_id="w", model="m", redact=False, env={"OTEL_TRACES_EXPORTER": "jaeger"}
        )


def test_genai_spans_of_two_workers_share_the_run_trace(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.jsonl"
    content = {telemetry.CONTENT_VARIABLE: "SPAN_ONLY"}
    first, second = tracer(path, "w-1", **content), tracer(path, "w-2", **content)
    with first.chat(RUN, TRANSCRIPT, TOOLS) as span:
        span.answered(
            {"role": "assistant", "content": "done"}, {"prompt_tokens": 7, "completion_tokens": 3}
        )
    with second.tool(RUN, "call_1", "refund", '{"order": "ord-1"}') as span:
        span.settled("outcome_unknown", {"error": "no answer"})
    first.close()
    second.close()

    (chat_resource, chat), (tool_resource, tool) = spans(path)
    assert chat["traceId"] == tool["traceId"] and chat["parentSpanId"] == tool["parentSpanId"]
    assert (chat_resource["service.instance.id"], tool_resource["service.instance.id"]) == (
        {"stringValue": "w-1"},
        {"stringValue": "w-2"},
    )
    assert chat["name"] == "chat m" and chat["kind"] == 3  # CLIENT
    attrs = chat["attrs"]
    assert (attrs["gen_ai.operation.name"], attrs["gen_ai.conversation.id"]) == ("chat", RUN)
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == ("7", "3")
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "refund ord-1"}]}
    ]
    assert json.loads(attrs["gen_ai.output.messages"])[0]["finish_reason"] == "stop"
    assert json.loads(attrs["gen_ai.tool.definitions"])[0]["replay"] == "non_replayable"
    assert tool["name"] == "execute_tool refund" and tool["status"]["code"] == 2  # ERROR
    assert (tool["attrs"]["gen_ai.tool.call.id"], tool["attrs"]["error.type"]) == (
        "call_1",
        "outcome_unknown",
    )


def test_content_only_when_asked_and_never_when_redacting(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.jsonl"
    env = {
        "OTEL_TRACES_EXPORTER": "otlp_file",
        telemetry.FILE_VARIABLE: str(path),
        telemetry.CONTENT_VARIABLE: "SPAN_ONLY",
    }
    for found in (tracer(path), telemetry.from_env(worker_id="w", model="m", redact=True, env=env)):
        with found.chat(RUN, TRANSCRIPT, TOOLS) as span:
            span.answered({"content": "secret"}, {"prompt_tokens": 1})
        with found.tool(RUN, "c", "refund", '{"card": "4111"}') as span:
            span.settled("succeeded", {"result": {"secret": 1}})
        found.close()
    text = path.read_text()
    assert "refund ord-1" not in text and "4111" not in text and "secret" not in text
    assert "gen_ai.usage.input_tokens" in text


def test_an_error_inside_a_span_is_recorded_and_raised(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t.jsonl"
    found = tracer(path)
    with pytest.raises(errors.ModelUnavailable), found.chat(RUN, TRANSCRIPT, TOOLS):
        raise errors.ModelUnavailable("model unavailable after 3 tries")
    found.close()
    [(_, span)] = spans(path)
    assert span["status"]["code"] == 2 and span["attrs"]["error.type"] == "ModelUnavailable"
