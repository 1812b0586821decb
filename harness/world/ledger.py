"""The world's append-only ledgers: what really happened outside the engine.

Checkers trust these over anything an engine says about itself. Each service appends
entries under a lock; `snapshot()` returns an immutable copy for the trial history.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal, TypeVar

import pydantic


class Entry(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    seq: int = 0
    t: float = 0.0


# The model protocol a request used (its messages are the Chat Completions transcript).
ModelApi = Literal["chat.completions", "responses"]
CHAT_API: ModelApi = "chat.completions"


class ModelRequest(Entry):
    kind: Literal["model.request"] = "model.request"
    run_key: str | None
    turn: int  # number of assistant messages in the request
    messages: list[dict[str, Any]]
    status_code: int
    # The assistant message the model answered with (None when it answered an error).
    response: dict[str, Any] | None = None
    usage: dict[str, int] | None = None
    # Transcript problems the model saw (tool call answered twice or never, ...).
    problems: list[str] = pydantic.Field(default_factory=list)
    # Why the model refused (status 4xx): "script exhausted", no run marker, ...
    error: str | None = None
    # Asked with `stream: true`: answered as server-sent events (a stream_cut can cut it).
    stream: bool = False
    # `responses`: asked at /v1/responses; `messages` is the transcript its input stands for.
    api: ModelApi = CHAT_API


class ToolRequest(Entry):
    kind: Literal["tool.request"] = "tool.request"
    tool: str
    key: str | None
    arguments: Any
    status_code: int
    # ok | failed_before_effect | effect_then_failed | deduplicated | hung | rejected
    outcome: str
    result: Any = None


class ToolEffect(Entry):
    kind: Literal["tool.effect"] = "tool.effect"
    tool: str
    key: str | None
    arguments: Any
    request_seq: int


class ToolQuery(Entry):
    kind: Literal["tool.query"] = "tool.query"
    tool: str
    key: str
    found: bool
    status_code: int = 200  # 405: the tool is not queryable; 404: found is False
    result: Any = None  # the stored result the service answered with, when found


class ToolRedeploy(Entry):
    """From here on `GET /tools` declares the tool with this fingerprint (scenario
    `redeploy`): a call sent before it may not be replayed after it."""

    kind: Literal["tool.redeploy"] = "tool.redeploy"
    tool: str
    version: str
    fingerprint: str
    # The request that made it happen; None: an engine upgrade did (the `upgrade` fault).
    after_request_seq: int | None = None


# What the tool services record.
ToolEntry = ToolRequest | ToolEffect | ToolQuery | ToolRedeploy


class ReplyRequest(Entry):
    kind: Literal["reply.request"] = "reply.request"
    key: str | None
    run_id: str | None
    content: str | None
    status_code: int
    outcome: str  # delivered | deduplicated | rejected


class ReplyDelivery(Entry):
    kind: Literal["reply.delivery"] = "reply.delivery"
    key: str | None
    run_id: str | None
    content: str
    request_seq: int


class ReplyQuery(Entry):
    kind: Literal["reply.query"] = "reply.query"
    key: str
    found: bool
    status_code: int = 200  # 405: the sink is not queryable; 404: found is False


class ForeignRequest(Entry):
    """A request that did not carry the trial's secret (harness/world/auth.py): refused
    with 403 before any handler ran, never one of the engine's. `seq` counts refusals."""

    kind: Literal["world.foreign"] = "world.foreign"
    service: str  # model | tools | tools-mcp | sink
    method: str
    path: str  # as sent, cut short


AnyEntry = ModelRequest | ToolEntry | ReplyRequest | ReplyDelivery | ReplyQuery


EntryT = TypeVar("EntryT", bound=Entry)


class Ledger:
    """Append-only, thread-safe. Sequence numbers are shared by one world (one clock)."""

    def __init__(self, counter: SequenceCounter | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: list[Entry] = []
        self._counter = counter or SequenceCounter()

    def append(self, entry: EntryT) -> EntryT:
        # Stamped under the lock, so that one ledger's entries are always in seq order.
        with self._lock:
            stamped = entry.model_copy(update={"seq": self._counter.next(), "t": time.time()})
            self._entries.append(stamped)
        return stamped

    def snapshot(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class SequenceCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    def next(self) -> int:
        with self._lock:
            self._value += 1
            return self._value
