"""The hardened shape for a framework without durable resume: wrap the model so that each
answer is reserved and recorded in Postgres, and replay the run from them.

`RecordedModel` is the SDK's own `OpenAIResponsesModel` with `get_response` wrapped: the
n-th model call of a run (the SDK runs a run again from its input after a crash, and every
earlier call is answered from the table, so n is the turn) is answered from
`agent_model_answers` when it was recorded; otherwise an attempt is counted in
`agent_model_attempts` before the request leaves (`model.pending`: an answer lost in a crash
is still billed), and the answer is recorded before it is used (`tools.pending` with tool
calls, `reply.ready` without: the decision). The client's own retries are off
(`max_retries=0`): a retry would re-send a lost request under the one attempt reserved for it.
"""

from __future__ import annotations

from typing import Any

import pydantic
from agent_kit import answers, store
from agent_kit import report as run_reports
from agents import ModelResponse, OpenAIResponsesModel, Usage
from openai import AsyncOpenAI
from openai.types.responses import ResponseOutputItem

_ITEMS = pydantic.TypeAdapter(list[ResponseOutputItem])


class RecordedModel(OpenAIResponsesModel):
    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await answers.recorded(
            lambda: super(RecordedModel, self).get_response(*args, **kwargs), _restore, _record
        )


def _record(answer: ModelResponse) -> tuple[dict[str, Any], bool]:
    calls = [item for item in answer.output if item.type == "function_call"]
    output = [item.model_dump(mode="json") for item in answer.output]
    return {"output": output, "usage": usage_of(answer.usage)}, bool(calls)


def build() -> RecordedModel:
    return RecordedModel("crashcert-scripted", AsyncOpenAI(max_retries=0, timeout=30))


def _restore(recorded: dict[str, Any]) -> ModelResponse:
    usage = recorded["usage"]
    return ModelResponse(
        output=_ITEMS.validate_python(recorded["output"]),
        usage=Usage(
            requests=1,
            input_tokens=usage["prompt_tokens"],
            output_tokens=usage["completion_tokens"],
            total_tokens=usage["total_tokens"],
        ),
        response_id=None,
    )


def usage_of(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def report(run_key: str, budgets: dict[str, int]) -> dict[str, Any]:
    """The RunReport from the agent's tables: recorded answers, attempts, journaled calls."""
    answers = store.execute("answers", run_key=run_key)
    turns = {
        item["call_id"]: turn
        for turn, answer in answers
        for item in answer["output"]
        if item.get("type") == "function_call"
    }
    return run_reports.from_tables(
        run_key, [answer["usage"] for _, answer in answers], turns, budgets
    )
