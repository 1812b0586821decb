"""An OpenAI Agents SDK agent (Agent + Runner on the Responses API) driven by a leased runs
table, written from harness/CONTRACT.md and certified by
tests/contract/test_openai_agents_engine.py.

    python openai_agent.py migrate | worker | submit | status RUN_KEY

A worker claims a run (agent_runs, a lease renewed by a thread), runs the agent with
`Runner.run` on the run's messages, then posts the final output to the reply sink. The SDK
has no durable resume: a run whose worker died is run again from its input.
OPENAI_AGENT_VARIANT picks `naive` (as the SDK's docs write an agent: the default model,
which is `OpenAIResponsesModel`, found by the openai client's OPENAI_BASE_URL) or
`hardened` (each model answer reserved and recorded, replayed on resume; tool calls
journaled by call id; a keyed reply; the client's own retries off).
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

HARDENED = os.environ.get("OPENAI_AGENT_VARIANT", "naive") == "hardened"
MODEL = "crashcert-scripted"


def build() -> Any:
    """The agent, as the SDK's docs write one; tracing is off because its exporter sends
    spans to api.openai.com, which a trial (and most CI) cannot reach."""
    import recorded_model
    import world_tools
    from agents import Agent, set_tracing_disabled

    set_tracing_disabled(True)
    tools = [world_tools.make_tool(d, hardened=HARDENED) for d in world.declarations().values()]
    model: Any = recorded_model.build() if HARDENED else MODEL
    return Agent(name="support", model=model, tools=tools)


async def run(agent: Any, run_key: str, run_input: dict[str, Any], owner: str) -> None:
    import recorded_model
    from agents import Runner

    budgets = run_input["budgets"]
    answers.start(run_key)
    result = await Runner.run(
        agent,
        run_input["messages"],
        context={"run_key": run_key},
        max_turns=budgets["iterations"] + 1,
    )
    if HARDENED:
        report = recorded_model.report(run_key, budgets)
    else:
        report = naive_report(run_key, result, budgets)
    agent_worker.finish(run_key, owner, report, str(result.final_output), hardened=HARDENED)


def naive_report(run_key: str, result: Any, budgets: dict[str, int]) -> dict[str, Any]:
    """What the RunResult knows: the answers of this attempt (none of an earlier one)."""
    import recorded_model

    calls = [recorded_model.usage_of(r.usage) for r in result.raw_responses]
    outputs = sum(1 for item in result.new_items if item.type == "tool_call_output_item")
    # No key is sent, so none can be reported (the contract's tool_calls need one).
    return run_reports.run_report(run_key, calls, len(calls), [], outputs, budgets)


def worker() -> None:
    agent_worker.serve_async(build, run, hardened=HARDENED)


if __name__ == "__main__":
    agent_worker.main(sys.argv, worker=worker, migrate=store.migrate)
