"""OTLP JSON traces read into plain spans: the input of `crashcert incident import --otlp`.

Accepts what exporters write: one `TracesData`/`ExportTraceServiceRequest` object, or JSON
lines of them (the OTLP file exporter's form), with ids in hex (the OTLP/JSON rule) or in
base64 (protobuf's generic JSON mapping), enums as numbers or names, 64-bit integers as
strings or numbers, attribute values as OTLP `AnyValue`s. Whatever cannot be read becomes a
problem (a sentence for the scenario's note), never an exception: a trace from production is
taken as it is. Pure: text in, spans out (the CLI reads the file).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

from harness import errors
from harness.inputs import readers

# Span status codes (opentelemetry/proto/trace/v1/trace.proto), by number and by name.
STATUS = {0: "unset", 1: "ok", 2: "error"}
STATUS_NAMES = {"STATUS_CODE_UNSET": "unset", "STATUS_CODE_OK": "ok", "STATUS_CODE_ERROR": "error"}
TRACE_ID_BYTES, SPAN_ID_BYTES = 16, 8

# What `incident import` reads of a trace: the scenario it makes must stay a scenario
# (harness/inputs/validation.py MAX_YAML_BYTES), and a trace is mostly other runs' spans.
MAX_TRACE_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Span:
    trace_id: str  # hex
    span_id: str  # hex
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: str  # unset | ok | error
    status_message: str = ""

    @property
    def operation(self) -> str | None:
        """gen_ai.operation.name, else the first word of the name (`chat gpt-4o`)."""
        named = self.attributes.get("gen_ai.operation.name")
        if isinstance(named, str) and named:
            return named
        first = self.name.split(" ", 1)[0]
        return first if first in ("chat", "execute_tool") else None

    def text(self, key: str) -> str | None:
        value = self.attributes.get(key)
        return None if value is None else str(value)

    def number(self, key: str) -> int | None:
        value = self.attributes.get(key)
        try:
            return None if value is None or isinstance(value, bool) else int(value)
        except (TypeError, ValueError):
            return None

    def structured(self, key: str) -> Any:
        """An attribute recorded as structured data or as its JSON text (the GenAI
        conventions allow both); None when absent, the text itself when it is no JSON."""
        return json_or_text(self.attributes.get(key))

    @property
    def failed(self) -> bool:
        return self.status == "error" or "error.type" in self.attributes

    @property
    def worker(self) -> str | None:
        """Which process emitted it: service.instance.id, else the pid; None: not told."""
        instance = self.resource.get("service.instance.id")
        pid = self.resource.get("process.pid")
        if instance is None and pid is None:
            return None
        return f"{instance or '?'}/{pid or '?'}"


@dataclasses.dataclass(frozen=True)
class Trace:
    spans: list[Span]
    problems: list[str]


def parse(text: str) -> Trace:
    """Every span of an OTLP JSON document or of JSON lines of them."""
    problems: list[str] = []
    documents: list[Any] = []
    try:
        documents = [readers.loads(text)]
    except ValueError:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append(readers.loads(line))
            except ValueError as error:
                problems.append(f"line {number} is not JSON ({error}): skipped")
    spans: list[Span] = []
    for document in documents:
        resource_spans = _get(document, "resourceSpans", "resource_spans")
        if not isinstance(resource_spans, list):
            problems.append("a JSON value without resourceSpans: not an OTLP trace, skipped")
            continue
        for item in resource_spans:
            resource = _attributes(_get(_get(item, "resource") or {}, "attributes"))
            for scope in _get(item, "scopeSpans", "scope_spans") or []:
                for raw in _get(scope, "spans") or []:
                    span = _span(raw, resource, problems)
                    if span is not None:
                        spans.append(span)
    if not spans and not problems:
        raise errors.CrashcertError("the trace file holds no span")
    if not spans:
        raise errors.CrashcertError(f"the trace file holds no readable span: {problems[0]}")
    return Trace(spans=spans, problems=problems)


def _get(item: Any, *names: str) -> Any:
    """A field by its JSON name or its proto name (both appear in the wild)."""
    if not isinstance(item, dict):
        return None
    for name in names:
        if name in item:
            return item[name]
    return None


def _span(raw: Any, resource: dict[str, Any], problems: list[str]) -> Span | None:
    if not isinstance(raw, dict):
        problems.append("a span that is not a JSON object: skipped")
        return None
    name = str(raw.get("name") or "")
    trace_id = _id(_get(raw, "traceId", "trace_id"), TRACE_ID_BYTES)
    span_id = _id(_get(raw, "spanId", "span_id"), SPAN_ID_BYTES)
    if trace_id is None or span_id is None:
        problems.append(f"span {name!r} has no usable traceId/spanId: skipped")
        return None
    status = _get(raw, "status") or {}
    code = _get(status, "code")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=_id(_get(raw, "parentSpanId", "parent_span_id"), SPAN_ID_BYTES),
        name=name,
        start_ns=_int(_get(raw, "startTimeUnixNano", "start_time_unix_nano")),
        end_ns=_int(_get(raw, "endTimeUnixNano", "end_time_unix_nano")),
        attributes=_attributes(_get(raw, "attributes")),
        resource=resource,
        status=STATUS_NAMES.get(str(code), STATUS.get(_int(code), "unset")),
        status_message=str(_get(status, "message") or ""),
    )


def _id(value: Any, size: int) -> str | None:
    """Hex as OTLP/JSON writes ids, or base64 as protobuf's JSON mapping does."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 2 * size:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded.hex() if len(decoded) == size else None


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _attributes(items: Any) -> dict[str, Any]:
    """OTLP KeyValue list -> {key: python value}."""
    found: dict[str, Any] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            found[item["key"]] = _value(item.get("value"))
    return found


def _value(value: Any) -> Any:
    """An OTLP AnyValue as plain JSON-like data."""
    if not isinstance(value, dict):
        return value
    for name in ("stringValue", "string_value"):
        if name in value:
            return value[name]
    for name in ("boolValue", "bool_value"):
        if name in value:
            return bool(value[name])
    for name in ("intValue", "int_value"):
        if name in value:
            return _int(value[name])
    for name in ("doubleValue", "double_value"):
        if name in value:
            return float(value[name])
    for name in ("bytesValue", "bytes_value"):
        if name in value:
            return value[name]  # base64 text: nothing of GenAI's is bytes
    array = _get(value, "arrayValue", "array_value")
    if isinstance(array, dict):
        return [_value(item) for item in array.get("values") or []]
    kvlist = _get(value, "kvlistValue", "kvlist_value")
    if isinstance(kvlist, dict):
        return _attributes(kvlist.get("values"))
    return None


def json_or_text(value: Any) -> Any:
    """A value stored either as data or as its JSON text (span attributes, jsonb columns
    read as text): the data, or the text itself when it is no JSON."""
    if isinstance(value, str):
        try:
            return readers.loads(value)
        except ValueError:
            return value
    return value
