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

import contextvars
from typing import Any

import store
from openai import AsyncOpenAI
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

import crashcert_probe as probe

# {"run_key", "turn"} of the run this task runs (pydantic_agent.run sets it per attempt).
TURN: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("turn")


class RecordedModel(WrapperModel):
    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        where = TURN.get()
        run_key, turn = where["run_key"], where["turn"]
        where["turn"] = turn + 1
        found = store.execute("answer_get", run_key=run_key, turn=turn)
        if found:
            (restored,) = ModelMessagesTypeAdapter.validate_python([found[0][0]["response"]])
            assert isinstance(restored, ModelResponse)
            return restored
        with store.committed("model.pending", run_key, turn=turn) as db:
            db.execute(store.sql("reserve_model"), {"run_key": run_key})
        answer = await super().request(messages, model_settings, model_request_parameters)
        probe.report("model.returned", run_key, turn=turn)
        calls = [part for part in answer.parts if isinstance(part, ToolCallPart)]
        (dumped,) = ModelMessagesTypeAdapter.dump_python([answer], mode="json")
        recorded = {
            "response": dumped,
            "usage": usage_of(answer.usage),
            "calls": [part.tool_call_id for part in calls],
        }
        with store.committed("tools.pending" if calls else "reply.ready", run_key, turn=turn) as db:
            db.execute(
                store.sql("answer_record"),
                {"run_key": run_key, "turn": turn, "answer": store.jsonb(recorded)},
            )
        return answer


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
    calls = [
        {**call, "turn": turns.get(call["id"], len(answers) - 1)}
        for call in store.tool_calls(run_key)
    ]
    usages = [answer["usage"] for _, answer in answers]
    iterations = max(store.model_attempts(run_key), len(usages))
    return run_report(run_key, usages, iterations, calls, len(calls), budgets)


def run_report(
    run_key: str,
    usages: list[dict[str, int]],
    iterations: int,
    tool_calls: list[dict[str, Any]],
    tool_count: int,
    budgets: dict[str, int],
) -> dict[str, Any]:
    model_calls = [{"turn": t, "state": "recorded", "usage": u} for t, u in enumerate(usages)]
    return {
        "v": 1,
        "run_id": run_key,
        "status": "running",
        "frontier": {"phase": None, "version": 0},
        "delivery": {"state": "none"},
        "model_calls": model_calls,
        "tool_calls": tool_calls,
        "budget": {
            "iterations": {"used": iterations, "limit": budgets["iterations"]},
            "tool_calls": {"used": tool_count, "limit": budgets["tool_calls"]},
            "tokens": {"used": sum(u["total_tokens"] for u in usages), "limit": budgets["tokens"]},
        },
    }
