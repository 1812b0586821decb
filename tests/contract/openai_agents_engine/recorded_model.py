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

import contextvars
from typing import Any

import pydantic
import store
from agents import ModelResponse, OpenAIResponsesModel, Usage
from openai import AsyncOpenAI
from openai.types.responses import ResponseOutputItem

import crashcert_probe as probe

# {"run_key", "turn"} of the run this task runs (openai_agent.run sets it per attempt).
TURN: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("turn")
_ITEMS = pydantic.TypeAdapter(list[ResponseOutputItem])


class RecordedModel(OpenAIResponsesModel):
    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        where = TURN.get()
        run_key, turn = where["run_key"], where["turn"]
        where["turn"] = turn + 1
        found = store.execute("answer_get", run_key=run_key, turn=turn)
        if found:
            return _restore(found[0][0])
        with store.committed("model.pending", run_key, turn=turn) as db:
            db.execute(store.sql("reserve_model"), {"run_key": run_key})
        answer = await super().get_response(*args, **kwargs)
        probe.report("model.returned", run_key, turn=turn)
        calls = [item for item in answer.output if item.type == "function_call"]
        recorded = {
            "output": [item.model_dump(mode="json") for item in answer.output],
            "usage": usage_of(answer.usage),
        }
        with store.committed("tools.pending" if calls else "reply.ready", run_key, turn=turn) as db:
            db.execute(
                store.sql("answer_record"),
                {"run_key": run_key, "turn": turn, "answer": store.jsonb(recorded)},
            )
        return answer


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
