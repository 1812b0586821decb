"""The hardened shape for a framework run without its durable-execution integration: wrap
the model so that each answer is reserved and recorded in Postgres, and replay the run.

`RecordedModel` is a Pydantic AI `WrapperModel` around its own `OpenAIResponsesModel`: the
n-th model request of a run (a run is run again from its input after a crash, and every
earlier request is answered from the table, so n is the turn) is answered from
`agent_model_answers` when it was recorded; otherwise an attempt is counted in
`agent_model_attempts` before the request leaves (`model.pending`: an answer lost in a crash
is still billed), and the answer is recorded before it is used (`tools.pending` with tool
calls, `reply.ready` without: the decision). The client's own retries are off
(`max_retries=0`): a retry would re-send a lost request under the one attempt reserved for it.
"""

from __future__ import annotations

from typing import Any

from agent_kit import answers, store
from agent_kit import report as run_reports
from openai import AsyncOpenAI
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings


class RecordedModel(WrapperModel):
    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        ask = super().request
        return await answers.recorded(
            lambda: ask(messages, model_settings, model_request_parameters), _restore, _record
        )


def _restore(recorded: dict[str, Any]) -> ModelResponse:
    (restored,) = ModelMessagesTypeAdapter.validate_python([recorded["response"]])
    assert isinstance(restored, ModelResponse)
    return restored


def _record(answer: ModelResponse) -> tuple[dict[str, Any], bool]:
    calls = [part.tool_call_id for part in answer.parts if isinstance(part, ToolCallPart)]
    (dumped,) = ModelMessagesTypeAdapter.dump_python([answer], mode="json")
    return {"response": dumped, "usage": usage_of(answer.usage), "calls": calls}, bool(calls)


def build() -> RecordedModel:
    provider = OpenAIProvider(openai_client=AsyncOpenAI(max_retries=0, timeout=30))
    return RecordedModel(OpenAIResponsesModel("crashcert-scripted", provider=provider))


def usage_of(usage: Any) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def report(run_key: str, budgets: dict[str, int]) -> dict[str, Any]:
    """The RunReport from the agent's tables: recorded answers, attempts, journaled calls."""
    answers = store.execute("answers", run_key=run_key)
    turns = {call_id: turn for turn, answer in answers for call_id in answer["calls"]}
    return run_reports.from_tables(
        run_key, [answer["usage"] for _, answer in answers], turns, budgets
    )
