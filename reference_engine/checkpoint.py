"""The frontier's payload: a versioned, validated recovery point (`Checkpoint`).

Requester input and model decisions are kept whole; only tool observations may be
excerpted in this recovery copy (the full body stays in tool_calls.outcome).

Two stored formats, one per release (`python -m reference_engine --release ...`): the
current release writes and reads format 1; the next release (engine.yaml `upgrade`, with its
migration sql/next/004) writes format 2, where one model turn's state is nested under
`turn_state`, and still reads format 1, which runs started before the upgrade carry. A
process is one release; a format it cannot read fails closed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

import pydantic

from reference_engine import errors

CHECKPOINT_VERSION = 1  # the current release's format
NEXT_FORMAT = 2  # the next release's
RELEASES = ("current", "next")
_TURN_STATE = ("turn", "decision", "model_call_id")  # format 2 nests these
MAX_CHECKPOINT_BYTES = 4 * 1024 * 1024
MAX_OBSERVATION_BYTES = 256 * 1024
EXCERPT_BYTES = 16 * 1024
UNKNOWN_NOTE = "The action may have happened; check before retrying."

Phase = Literal["model_pending", "tools_pending", "model_ready", "reply_ready"]


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class ToolRequest(Strict):
    id: str = pydantic.Field(min_length=1)  # the model's tool_call id
    name: str
    arguments: str  # as the model sent it (a JSON string)


class Decision(Strict):
    """A model turn, normalised: either content or tool calls."""

    content: str | None = None
    tool_calls: tuple[ToolRequest, ...] = ()

    @pydantic.model_validator(mode="after")
    def _one_kind(self) -> Decision:
        if bool(self.tool_calls) == (self.content is not None):
            raise ValueError("a decision has either content or tool_calls, exactly one")
        return self

    def assistant_message(self) -> dict[str, Any]:
        if self.content is not None:
            return {"role": "assistant", "content": self.content}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ],
        }


class UsageTotals(Strict):
    prompt_tokens: int = pydantic.Field(default=0, ge=0)
    completion_tokens: int = pydantic.Field(default=0, ge=0)
    total_tokens: int = pydantic.Field(default=0, ge=0)

    def plus(self, usage: dict[str, int]) -> UsageTotals:
        return UsageTotals(
            prompt_tokens=self.prompt_tokens + int(usage.get("prompt_tokens", 0)),
            completion_tokens=self.completion_tokens + int(usage.get("completion_tokens", 0)),
            total_tokens=self.total_tokens + int(usage.get("total_tokens", 0)),
        )


class Checkpoint(Strict):
    v: Literal[1] = 1
    transcript: tuple[dict[str, Any], ...]
    turn: int = pydantic.Field(ge=0)  # assistant messages in the transcript = the model's turn
    decision: Decision | None = None  # this turn's decision once recorded
    model_call_id: str | None = None  # the open call while model_pending
    usage: UsageTotals = pydantic.Field(default_factory=UsageTotals)
    reply: str | None = None


def initial(messages: list[dict[str, Any]]) -> Checkpoint:
    return Checkpoint(transcript=tuple(messages), turn=0)


@dataclasses.dataclass
class _Formats:
    """What this process writes, and what it reads (use_release)."""

    writes: int = CHECKPOINT_VERSION
    reads: frozenset[int] = frozenset({CHECKPOINT_VERSION})


_formats = _Formats()


def use_release(release: str) -> None:
    """Make this process the current or the next release (RELEASES)."""
    if release not in RELEASES:
        raise errors.ConfigError(f"unknown release {release!r}; one of {', '.join(RELEASES)}")
    if release == "next":
        _formats.writes, _formats.reads = NEXT_FORMAT, frozenset({CHECKPOINT_VERSION, NEXT_FORMAT})
    else:
        _formats.writes, _formats.reads = CHECKPOINT_VERSION, frozenset({CHECKPOINT_VERSION})


def written_format() -> int:
    """The format `dump` writes, which the frontier's checkpoint_version column names."""
    return _formats.writes


def dump(point: Checkpoint) -> dict[str, Any]:
    payload = point.model_dump(mode="json")
    if written_format() == NEXT_FORMAT:
        payload = to_format_2(payload)
    size = len(json.dumps(payload, separators=(",", ":")).encode())
    if size > MAX_CHECKPOINT_BYTES:
        raise errors.CheckpointInvalid(
            f"checkpoint of {size} bytes exceeds the {MAX_CHECKPOINT_BYTES} byte bound"
        )
    return payload


def load(payload: Any, *, checkpoint_version: int | None = None) -> Checkpoint:
    """Validate a stored payload; anything unexpected fails closed."""
    if not isinstance(payload, dict):
        raise errors.CheckpointInvalid(f"checkpoint is not an object: {type(payload).__name__}")
    version = payload.get("v")
    readable = _formats.reads
    if version not in readable or checkpoint_version not in (None, version):
        raise errors.CheckpointInvalid(
            f"unknown checkpoint version {version!r} (column {checkpoint_version!r}); "
            f"this engine reads version {', '.join(str(v) for v in sorted(readable))} only"
        )
    if version == NEXT_FORMAT:
        payload = from_format_2(payload)
    try:
        return Checkpoint.model_validate(payload)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or '(top)'}: {item['msg']}"
            for item in error.errors()
        )
        raise errors.CheckpointInvalid(f"malformed checkpoint: {problems}") from None


def to_format_2(payload: dict[str, Any]) -> dict[str, Any]:
    """A format 1 payload in format 2: the turn's state nested, the rest as it was."""
    rest = {key: value for key, value in payload.items() if key not in _TURN_STATE}
    return {**rest, "v": NEXT_FORMAT, "turn_state": {key: payload.get(key) for key in _TURN_STATE}}


def from_format_2(payload: dict[str, Any]) -> dict[str, Any]:
    """A format 2 payload as format 1 (what `Checkpoint` validates); a missing or misshapen
    `turn_state` is left for validation to refuse, never filled with defaults."""
    state = payload.get("turn_state")
    if not isinstance(state, dict) or set(state) != set(_TURN_STATE):
        raise errors.CheckpointInvalid(f"format 2 checkpoint without a whole turn_state: {state!r}")
    rest = {key: value for key, value in payload.items() if key != "turn_state"}
    return {**rest, **state, "v": CHECKPOINT_VERSION}


def tool_message_content(state: str, outcome: dict[str, Any] | None) -> str:
    """The `role: tool` content of CONTRACT.md section 3 for a settled call."""
    outcome = outcome or {}
    if state == "succeeded":
        body: dict[str, Any] = {"status": "ok", "result": outcome.get("result")}
    elif state == "outcome_unknown":
        body = {"status": "outcome_unknown", "note": UNKNOWN_NOTE}
    elif state == "rejected":
        body = {"status": "error", "error": "rejected by an operator; not executed"}
    else:
        body = {"status": "error", "error": str(outcome.get("error", "tool call failed"))}
    return json.dumps(body, separators=(",", ":"))


def excerpt(content: str, *, limit: int = MAX_OBSERVATION_BYTES) -> str:
    """Visibly shorten an oversized observation for the recovery copy."""
    raw = content.encode()
    if len(raw) <= limit:
        return content
    head = raw[:EXCERPT_BYTES].decode(errors="ignore")
    return f"{head}[excerpt: {EXCERPT_BYTES} of {len(raw)} bytes; full body in tool_calls.outcome]"


def input_size(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, separators=(",", ":")).encode())
