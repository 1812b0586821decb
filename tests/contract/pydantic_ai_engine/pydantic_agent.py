"""A Pydantic AI agent (`Agent("openai:...")`, which is its OpenAIResponsesModel on the
Responses API) driven by a leased runs table, written from harness/CONTRACT.md and
certified by tests/contract/test_pydantic_ai_engine.py.

    python pydantic_agent.py migrate | worker | submit | status RUN_KEY

A worker claims a run (agent_runs, a lease renewed by a thread), runs the agent on the
run's user message (its system message as the agent's instructions), then posts the output
to the reply sink. Without a durable-execution integration (Temporal, DBOS, Prefect) a run
whose worker died is run again from its input. PYDANTIC_AGENT_VARIANT picks `naive` (as the
docs write an agent, the openai client found by OPENAI_BASE_URL) or `hardened` (each model
answer reserved and recorded, replayed on resume; tool calls journaled by call id; a keyed
reply; the client's own retries off).
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/contract: agent_kit
from agent_kit import answers, store, world
from agent_kit import report as run_reports
from agent_kit import worker as agent_worker

HARDENED = os.environ.get("PYDANTIC_AGENT_VARIANT", "naive") == "hardened"
MODEL = "openai:crashcert-scripted"


def build() -> Any:
    import recorded_model
    import world_tools
    from pydantic_ai import Agent, RunContext

    tools = [world_tools.make_tool(d, hardened=HARDENED) for d in world.declarations().values()]
    model: Any = recorded_model.build() if HARDENED else MODEL
    agent = Agent(model, deps_type=dict, tools=tools)

    @agent.instructions
    def system(ctx: RunContext[dict[str, Any]]) -> str:
        return str(ctx.deps["system"])

    # Pydantic AI builds its validators on the first run, holding the GIL for seconds under
    # load: the lease thread could not renew, and every first claim lapsed (three attempts
    # of one run, no fault struck). A dry run on TestModel, calling no tool, builds them
    # before any claim.
    # The openai client imports its Responses resources on first use, too.
    from pydantic_ai.models import infer_model
    from pydantic_ai.models.test import TestModel

    with agent.override(model=TestModel(call_tools=[])):
        agent.run_sync("warm up", deps={"run_key": "", "system": ""})
    real = infer_model(model) if isinstance(model, str) else model
    getattr(real, "wrapped", real).client.responses  # noqa: B018 - the attribute imports them
    return agent


def _text(messages: list[dict[str, Any]], role: str) -> str:
    return "\n".join(str(m["content"]) for m in messages if m["role"] == role)


async def run(agent: Any, run_key: str, run_input: dict[str, Any], owner: str) -> None:
    import recorded_model
    from pydantic_ai.usage import UsageLimits

    budgets = run_input["budgets"]
    messages = run_input["messages"]
    answers.start(run_key)
    deps = {"run_key": run_key, "system": _text(messages, "system")}
    limits = UsageLimits(request_limit=budgets["iterations"] + 1)
    result = await agent.run(_text(messages, "user"), deps=deps, usage_limits=limits)
    if HARDENED:
        report = recorded_model.report(run_key, budgets)
    else:
        report = naive_report(run_key, result, budgets)
    agent_worker.finish(run_key, owner, report, str(result.output), hardened=HARDENED)


def naive_report(run_key: str, result: Any, budgets: dict[str, int]) -> dict[str, Any]:
    """What the run's messages know: the answers of this attempt (none of an earlier one)."""
    import recorded_model
    from pydantic_ai.messages import ModelResponse, ToolReturnPart

    messages = result.all_messages()
    calls = [recorded_model.usage_of(m.usage) for m in messages if isinstance(m, ModelResponse)]
    outputs = sum(isinstance(part, ToolReturnPart) for m in messages for part in m.parts)
    # No key is sent, so none can be reported (the contract's tool_calls need one).
    return run_reports.run_report(run_key, calls, len(calls), [], outputs, budgets)


def worker() -> None:
    agent_worker.serve_async(build, run, hardened=HARDENED)


if __name__ == "__main__":
    agent_worker.main(sys.argv, worker=worker, migrate=store.migrate)
