"""OpenTelemetry GenAI spans of the worker's model and tool calls (extra `crashcert[otel]`).

Off unless `OTEL_TRACES_EXPORTER` names an exporter (unlike the SDK's default `otlp`: an
engine run without a collector sends nothing); without the SDK installed a worker says so
once and runs untraced. Values, comma-separated:

- `otlp`: OTLP/HTTP protobuf (`OTEL_EXPORTER_OTLP_*` as usual), batched;
- `otlp_file`: OTLP JSON lines, one `TracesData` per line (the OTLP file exporter's form),
  appended to the file `CRASHCERT_OTEL_TRACES_FILE` names, each span as it ends, so a worker
  killed with SIGKILL loses no span it finished (`crashcert incident import --otlp` reads it);
- `console`: the same lines on stderr; `none`: nothing.

Spans follow the GenAI semantic conventions: `chat {model}` (CLIENT) per model call and
`execute_tool {name}` (INTERNAL) per tool call, with `gen_ai.conversation.id` = the run id;
all spans of a run share one trace id made from the run id, whichever worker emits them. The
resource names the worker: `service.instance.id` = CRASHCERT_WORKER_ID, `process.pid`.
Messages, arguments, results and tool definitions are recorded only when
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `SPAN_ONLY` or `SPAN_AND_EVENT`
(or `true`), and never when the engine redacts (`CRASHCERT_REDACT`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

FILE_VARIABLE = "CRASHCERT_OTEL_TRACES_FILE"
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_ON = frozenset({"span_only", "span_and_event", "true"})
SERVICE_NAME = "crashcert-reference-engine"
SCOPE = "reference_engine"
# The contract's tool policy, carried in gen_ai.tool.definitions beside the function.
POLICY = ("replay", "effect", "honours_idempotency_key", "queryable", "requires_approval")
FINISH = {"tool_calls": "tool_call", "function_call": "tool_call"}


class Span:
    """What the worker tells a span; the no-op one when tracing is off."""

    def answered(self, message: Mapping[str, Any], usage: Mapping[str, int]) -> None:
        pass

    def settled(self, state: str, outcome: Mapping[str, Any]) -> None:
        pass


class Tracer:
    """Tracing off: every call costs nothing."""

    @contextlib.contextmanager
    def chat(
        self, run_id: str, messages: Sequence[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]]
    ) -> Iterator[Span]:
        yield Span()

    @contextlib.contextmanager
    def tool(self, run_id: str, call_id: str, name: str, arguments: str) -> Iterator[Span]:
        yield Span()

    def close(self) -> None:
        pass


def from_env(
    *, worker_id: str, model: str, redact: bool, env: Mapping[str, str] | None = None
) -> Tracer:
    env = os.environ if env is None else env
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [name for name in names if name != "none"]
    if not names:
        return Tracer()
    try:
        from reference_engine import telemetry_sdk
    except ImportError as error:
        print(
            f"reference_engine: OTEL_TRACES_EXPORTER={','.join(names)} but the OpenTelemetry "
            f"SDK is missing (pip install 'crashcert[otel]'): {error}; not tracing",
            file=sys.stderr,
        )
        return Tracer()
    content = env.get(CONTENT_VARIABLE, "").strip().lower() in CONTENT_ON and not redact
    return telemetry_sdk.SdkTracer(
        names, worker_id=worker_id, model=model, content=content, env=env
    )


# -- what the spans say (no SDK needed) --------------------------------------------------


def ids(run_id: str) -> tuple[int, int]:
    """The run's trace id and the span id its spans hang under: the same in every worker."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def messages(transcript: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages in the GenAI conventions' form (role and parts)."""
    return [_message(message) for message in transcript]


def output(message: Mapping[str, Any], finish: str) -> list[dict[str, Any]]:
    return [{**_message(message), "finish_reason": FINISH.get(finish, finish)}]


def definitions(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool declarations as gen_ai.tool.definitions: the function, flat, and its policy."""
    found = []
    for declaration in tools:
        function = declaration.get("function") or {}
        found.append(
            {
                "type": "function",
                **function,
                **{k: declaration[k] for k in POLICY if k in declaration},
            }
        )
    return found


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = str(message.get("role") or "user")
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": _json(content),
            }
        )
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": _json(function.get("arguments")),
            }
        )
    return {"role": role, "parts": parts}


def _json(text: Any) -> Any:
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def dumps(value: Any) -> str:
    """Structured attributes as JSON text: the Python SDK records no maps on spans."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


class AppendFile:
    """Whole lines appended with one write each: workers share the file safely."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        data = (line.rstrip("\n") + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
