"""The OpenTelemetry SDK behind reference_engine/telemetry.py, imported only when tracing is
on (extra `crashcert[otel]`: opentelemetry-sdk, the OTLP proto encoder and HTTP exporter)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common import trace_encoder
from opentelemetry.sdk import resources
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.trace import export as sdk_export

from reference_engine import errors, telemetry

# OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping writes base64.
ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


class SdkSpan(telemetry.Span):
    def __init__(self, span: trace.Span, *, content: bool) -> None:
        self.span = span
        self.content = content

    def answered(self, message: Mapping[str, Any], usage: Mapping[str, int]) -> None:
        span = self.span
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens", 0)))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens", 0)))
        span.set_attribute("gen_ai.response.finish_reasons", [telemetry.FINISH.get(finish, finish)])
        if self.content:
            span.set_attribute(
                "gen_ai.output.messages", telemetry.dumps(telemetry.output(message, finish))
            )

    def settled(self, state: str, outcome: Mapping[str, Any]) -> None:
        if state == "succeeded":
            if self.content:
                span_result = telemetry.dumps(outcome.get("result"))
                self.span.set_attribute("gen_ai.tool.call.result", span_result)
            return
        # failed (the tool refused) or outcome_unknown (it may have happened)
        self.span.set_attribute("error.type", state)
        self.span.set_status(trace.StatusCode.ERROR, str(outcome.get("error") or state)[:500])


class SdkTracer(telemetry.Tracer):
    def __init__(
        self,
        exporters: Sequence[str],
        *,
        worker_id: str,
        model: str,
        content: bool,
        env: Mapping[str, str],
    ) -> None:
        resource = resources.Resource.create(
            {
                "service.name": env.get("OTEL_SERVICE_NAME") or telemetry.SERVICE_NAME,
                "service.instance.id": worker_id,
                "process.pid": os.getpid(),
            }
        )
        self.provider = sdk_trace.TracerProvider(resource=resource)
        for name in exporters:
            self.provider.add_span_processor(_processor(name, env))
        self.tracer = self.provider.get_tracer(telemetry.SCOPE)
        self.model = model
        self.content = content

    @contextlib.contextmanager
    def chat(
        self, run_id: str, messages: Sequence[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]]
    ) -> Iterator[telemetry.Span]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": self.model,
            "gen_ai.conversation.id": run_id,
        }
        if self.content:
            attributes["gen_ai.input.messages"] = telemetry.dumps(telemetry.messages(messages))
            attributes["gen_ai.tool.definitions"] = telemetry.dumps(telemetry.definitions(tools))
        with self._span(f"chat {self.model}", run_id, trace.SpanKind.CLIENT, attributes) as span:
            yield SdkSpan(span, content=self.content)

    @contextlib.contextmanager
    def tool(
        self, run_id: str, call_id: str, name: str, arguments: str
    ) -> Iterator[telemetry.Span]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": run_id,
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = arguments
        with self._span(
            f"execute_tool {name}", run_id, trace.SpanKind.INTERNAL, attributes
        ) as span:
            yield SdkSpan(span, content=self.content)

    @contextlib.contextmanager
    def _span(
        self, name: str, run_id: str, kind: trace.SpanKind, attributes: dict[str, Any]
    ) -> Iterator[trace.Span]:
        trace_id, parent_id = telemetry.ids(run_id)
        parent = trace.NonRecordingSpan(
            trace.SpanContext(
                trace_id=trace_id,
                span_id=parent_id,
                is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            )
        )
        context = trace.set_span_in_context(parent, context_api.Context())
        with self.tracer.start_as_current_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as error:
                span.set_attribute("error.type", type(error).__name__)
                span.set_status(trace.StatusCode.ERROR, str(error)[:500])
                raise

    def close(self) -> None:
        self.provider.shutdown()


def _processor(name: str, env: Mapping[str, str]) -> sdk_trace.SpanProcessor:
    if name == "otlp_file":
        path = env.get(telemetry.FILE_VARIABLE)
        if not path:
            raise errors.ConfigError(
                f"OTEL_TRACES_EXPORTER=otlp_file needs {telemetry.FILE_VARIABLE} (the file)"
            )
        # each span written as it ends: a SIGKILLed worker keeps the spans it finished
        return sdk_export.SimpleSpanProcessor(JsonLinesExporter(telemetry.AppendFile(path)))
    if name == "console":
        return sdk_export.SimpleSpanProcessor(JsonLinesExporter(_Stderr()))
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http import trace_exporter

        return sdk_export.BatchSpanProcessor(trace_exporter.OTLPSpanExporter())
    raise errors.ConfigError(
        f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, otlp_file, console, none)"
    )


class _Stderr:
    def write(self, line: str) -> None:
        sys.stderr.write(line.rstrip("\n") + "\n")
        sys.stderr.flush()


class JsonLinesExporter(sdk_export.SpanExporter):
    """Spans as OTLP/JSON lines: the SDK's OTLP encoder, protobuf's JSON mapping, hex ids
    and enums as numbers (the OTLP/JSON rules)."""

    def __init__(self, out: telemetry.AppendFile | _Stderr) -> None:
        self.out = out

    def export(self, spans: Sequence[sdk_trace.ReadableSpan]) -> sdk_export.SpanExportResult:
        request = trace_encoder.encode_spans(spans)
        data = json_format.MessageToDict(request, use_integers_for_enums=True)
        try:
            self.out.write(json.dumps(_hex_ids(data), separators=(",", ":")))
        except OSError as error:
            print(f"reference_engine: cannot write spans: {error}", file=sys.stderr)
            return sdk_export.SpanExportResult.FAILURE
        return sdk_export.SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex()
            if key in ID_FIELDS and isinstance(item, str)
            else _hex_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    return value
