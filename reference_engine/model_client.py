"""The model over the official `openai` client (retries off: the engine owns retries).

Imported only by the worker, so the short-lived CLI commands never load `openai`.

With `stream` (CRASHCERT_STREAM=1, reference_engine/engine_stream.yaml) the answer comes as
server-sent events, assembled here from its content and tool-call deltas and its usage
chunk. A stream that ends without its finish reason or its usage is no answer: the engine
never acts on part of a decision.

A request that left and got no whole answer (reset, timeout, a stream cut short) may have
been served and billed: ModelAnswerLost, and the worker opens a new model call, charging
an iteration for it, instead of retrying here under the same one. Only what never left
(connection refused) or was refused (5xx, 429) is retried in place.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from reference_engine import errors

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the official client's own default
# One client per process, built at import: loading the TLS trust store and the client's
# lazily imported resources cost ~0.15 s (more under load). A worker forked from a warm
# server inherits both, and each ModelClient is a cheap copy sharing its connection pool
# (no connection is opened before the fork, so none is shared across processes).
_PROTOTYPE = openai.OpenAI(api_key="unset", base_url=DEFAULT_BASE_URL, max_retries=0)
_PROTOTYPE.chat.completions  # noqa: B018 - the attribute imports the chat resources


def _build_response_types() -> None:
    """The client's response models build their pydantic schemas on first use, ~3 ms of
    CPU in every fresh worker (half its first model call). Built here, at import, in the
    fork server: every forked worker inherits them built. Canned answers, no I/O."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    completion = ChatCompletion.construct(
        id="warm",
        object="chat.completion",
        created=0,
        model="warm",
        choices=[
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            }
        ],
        usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    )
    _answer(completion)
    chunk = ChatCompletionChunk.construct(
        id="warm",
        object="chat.completion.chunk",
        created=0,
        model="warm",
        choices=[{"index": 0, "delta": {"content": "", "tool_calls": [{"index": 0, **call}]}}],
        usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    )
    collect([chunk])


@dataclasses.dataclass(frozen=True)
class ModelAnswer:
    message: dict[str, Any]
    usage: dict[str, int]
    raw: dict[str, Any]


class ModelClient:
    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout_s: float,
        delays: list[float],
        stream: bool = False,
    ) -> None:
        self.model = model
        self.delays = delays
        self.stream = stream
        self.client = _PROTOTYPE.with_options(
            base_url=base_url or DEFAULT_BASE_URL,
            api_key=api_key,
            timeout=timeout_s,
        )

    def close(self) -> None:
        """Nothing to close: the connection pool is the process's, shared by every copy of
        the prototype, and closing it would break the next ModelClient in this process."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelAnswer:
        last: Exception | None = None
        for delay in [0.0, *self.delays]:
            time.sleep(delay)
            try:
                extra: dict[str, Any] = {"tools": tools} if tools else {}
                if self.stream:
                    return self._streamed(messages, extra)
                completion = self.client.chat.completions.create(
                    model=self.model,
                    messages=[],
                    extra_body=wire_body(messages, tools),
                )
            except openai.APIConnectionError as error:
                if not _never_sent(error):
                    raise errors.ModelAnswerLost(
                        f"no answer: {error!r}: {error.__cause__!r}"
                    ) from None
                last = error  # never sent: the same call may be tried again
                continue
            except IncompleteStream as error:
                raise errors.ModelAnswerLost(f"no whole answer: {error}") from None
            except (openai.RateLimitError, openai.InternalServerError) as error:
                last = error  # not processed (or overloaded): the same call may be retried
                continue
            except openai.APIStatusError as error:
                if error.status_code >= 500 or error.status_code in (408, 409, 429):
                    last = error
                    continue
                raise errors.ModelRefused(
                    f"model refused the request ({error.status_code}): {error.message}"
                ) from None
            return _answer(completion)
        raise errors.ModelUnavailable(
            f"model unavailable after {len(self.delays) + 1} tries: {last}"
        )

    def _streamed(self, messages: list[dict[str, Any]], extra: dict[str, Any]) -> ModelAnswer:
        create: Any = self.client.chat.completions.create  # Any: its overloads want typed params
        stream = create(
            model=self.model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **extra,
        )
        with stream:
            try:
                return assemble(stream)
            except (IncompleteStream, openai.APIError):
                raise
            except Exception as error:  # the transport broke mid-body (the client's own httpx)
                raise IncompleteStream(f"stream broken: {error!r}") from None


def wire_body(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The transcript and tools as sent, through the client's `extra_body`. Given as
    `messages=`, the client walks every message and tool through its typed-dict transform
    (~4 ms of CPU per call at six messages, growing with the transcript) only to send the
    same JSON: these are plain JSON already (tests/engine check it is the same body)."""
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    return body


def _never_sent(error: BaseException) -> bool:
    """Whether the connection was refused: the request never left, nothing was served."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class IncompleteStream(Exception):
    """The stream ended before its finish reason or its usage: no whole answer came."""


def assemble(chunks: Any) -> ModelAnswer:
    """One answer from a stream's chunks; IncompleteStream unless it came whole."""
    partial = collect(chunks)
    if partial.finish is None or partial.usage is None:
        missing = "finish reason" if partial.finish is None else "usage"
        raise IncompleteStream(f"stream ended after {partial.seen} chunks without its {missing}")
    return partial.answer()


@dataclasses.dataclass(frozen=True)
class Partial:
    """What a stream delivered: maybe all of an answer, maybe a part of it."""

    message: dict[str, Any]
    finish: str | None
    usage: Any  # the usage chunk's, None until it came
    seen: int  # chunks

    def answer(self) -> ModelAnswer:
        usage = _usage(self.usage)
        choice = {"message": self.message, "finish_reason": self.finish}
        return ModelAnswer(
            message=self.message,
            usage=usage,
            raw={"choices": [choice], "usage": usage, "streamed": True},
        )


def collect(chunks: Any) -> Partial:
    """The content, tool calls (deltas joined by index), finish reason and usage so far."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    usage_obj: Any = None
    seen = 0
    for chunk in chunks:
        seen += 1
        usage_obj = chunk.usage or usage_obj
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            delta = choice.delta
            content.append(delta.content or "")
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += part.id or ""
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant"}
    if "".join(content):
        message["content"] = "".join(content)
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for _, call in sorted(calls.items())
        ]
    return Partial(message, finish, usage_obj, seen)


def _usage(usage_obj: Any) -> dict[str, int]:
    return {
        "prompt_tokens": int(getattr(usage_obj, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage_obj, "completion_tokens", 0) or 0),
        "total_tokens": int(getattr(usage_obj, "total_tokens", 0) or 0),
    }


def _answer(completion: Any) -> ModelAnswer:
    try:
        message = completion.choices[0].message.model_dump(mode="json", exclude_none=True)
    except (IndexError, AttributeError) as error:
        raise errors.WorldError(f"model answered without a choice: {error}") from None
    usage = _usage(completion.usage)
    return ModelAnswer(message=message, usage=usage, raw=completion.model_dump(mode="json"))


_build_response_types()
