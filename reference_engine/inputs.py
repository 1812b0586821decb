"""The RunInput the engine accepts at `submit` (validated at the edge)."""

from __future__ import annotations

import json
from typing import Any

import pydantic

from reference_engine import checkpoint as checkpoint_module
from reference_engine import errors

# the recovery copy must fit the checkpoint bound with room for the run's own turns
MAX_INPUT_BYTES = checkpoint_module.MAX_CHECKPOINT_BYTES // 2


class Budgets(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    iterations: int = pydantic.Field(default=8, ge=1)
    tool_calls: int = pydantic.Field(default=8, ge=0)
    tokens: int = pydantic.Field(default=100_000, ge=1)


class RunInput(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    run_key: str = pydantic.Field(min_length=1, max_length=512)
    messages: list[dict[str, Any]] = pydantic.Field(min_length=1)
    budgets: Budgets = pydantic.Field(default_factory=Budgets)
    max_attempts: int = pydantic.Field(default=5, ge=1, le=1000)

    @pydantic.field_validator("messages")
    @classmethod
    def _roles(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, message in enumerate(messages):
            if not isinstance(message.get("role"), str):
                raise ValueError(f"messages[{index}] has no role")
        return messages


def parse(text: str | bytes) -> RunInput:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise errors.InvalidInput(f"run input is not JSON: {error}") from None
    try:
        run_input = RunInput.model_validate(data)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or '(top)'}: {item['msg']}"
            for item in error.errors()
        )
        raise errors.InvalidInput(f"invalid run input: {problems}") from None
    size = checkpoint_module.input_size(run_input.messages)
    if size > MAX_INPUT_BYTES:
        raise errors.InvalidInput(
            f"run input messages are {size} bytes; the bound is {MAX_INPUT_BYTES} "
            "(requester input is never shortened, so it is refused)"
        )
    return run_input
