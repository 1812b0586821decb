"""The agent's service on Restate (https://github.com/restatedev/sdk-python): one Workflow
per run, keyed by the run id, whose `run` handler is the agent loop in the shape Restate's
docs give one: the model call and each tool call a durable step (`ctx.run_typed`), the
reply a step too. The server journals a step's result when the endpoint sends it on the
invocation's stream; a step whose result never reached the journal (the worker died, or
its link broke) runs again when the server retries the invocation, on whichever worker
the front hands the retry to: steps are at-least-once.

RESTATE_AGENT_KEYS picks the variant:
- `random` (naive, as an agent loop is usually written): each attempt sends a fresh key
  (what an HTTP client that makes its own idempotency keys does per request);
- `derived` (hardened): keys derived from the invocation and the call
  (`<run>:<call id>`, `<run>:reply`, the run being the workflow's key); a tool that cannot
  honour keys but can be queried, and the reply sink, are asked by key before any send.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import urllib.error
from typing import Any

import restate

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/contract: agent_kit
from agent_kit import server_steps
from agent_kit.world import http

agent = restate.Workflow("AgentRun")


def keys() -> str:
    """Read per call: a worker forked from a warm server imported this module before its
    own environment was set."""
    return os.environ.get("RESTATE_AGENT_KEYS", "random")


def list_tools() -> list[dict[str, Any]]:
    return http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]  # type: ignore[no-any-return]


MODEL_TRIES = 4


def call_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's answer and how many requests it took. Naive: one request, a failure
    raised (Restate retries the step, and the report never counts the lost answer).
    Hardened: the step retries a lost answer itself and counts every request (each may
    have been billed), journaled with the answer."""
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    body = {"model": "crashcert", "messages": messages, "tools": tools}
    tries = MODEL_TRIES if keys() == "derived" else 1
    for attempt in range(1, tries + 1):
        try:
            status, answer = http(url, body)
        except (urllib.error.URLError, OSError):
            if attempt == tries:
                raise
            continue
        if status != 200:
            raise RuntimeError(f"model answered {status}: {answer}")  # the step is retried
        return {**answer, "attempts": attempt}
    raise AssertionError("unreachable")


def call_tool(declaration: dict[str, Any], arguments: Any, key: str) -> dict[str, Any]:
    return server_steps.call_tool(declaration, arguments, key, derived=keys() == "derived")


def deliver(run_id: str, content: str) -> str:
    return server_steps.deliver(run_id, content, derived=keys() == "derived")


@agent.main()
async def run(ctx: restate.WorkflowContext, payload: dict[str, Any]) -> dict[str, Any]:
    run_id = ctx.key()
    budgets = payload["budgets"]
    messages = list(payload["messages"])
    report: dict[str, Any] = {
        "run_id": run_id, "status": "succeeded", "attempts": 1,
        "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"},
        "model_calls": [], "tool_calls": [],
    }  # fmt: skip
    declarations = await ctx.run_typed("list_tools", list_tools)
    by_name = {d["function"]["name"]: d for d in declarations}
    tools = [{"type": d["type"], "function": d["function"]} for d in declarations]
    while True:
        turn = len(report["model_calls"])
        answer = await ctx.run_typed(f"model-{turn}", call_model, messages=messages, tools=tools)
        message = answer["choices"][0]["message"]
        report["model_calls"].append({"turn": turn, "state": "recorded", "usage": answer["usage"]})
        report["inferences"] = report.get("inferences", 0) + answer.get("attempts", 1)
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            name = call["function"]["name"]
            done = await ctx.run_typed(
                f"tool-{call['id']}",
                call_tool,
                declaration=by_name[name],
                arguments=json.loads(call["function"]["arguments"]),
                key=f"{run_id}:{call['id']}",
            )
            report["tool_calls"].append(
                {"id": call["id"], "name": name, "key": done["key"], "turn": turn,
                 "state": "succeeded" if done["content"]["status"] == "ok" else "failed"}
            )  # fmt: skip
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(done["content"])}
            )
    key = await ctx.run_typed("reply", deliver, run_id=run_id, content=message["content"])
    report["delivery"] = {"state": "delivered", "key": key}
    calls = report["model_calls"]
    report["budget"] = {
        "iterations": {"used": report.pop("inferences"), "limit": budgets["iterations"]},
        "tool_calls": {"used": len(report["tool_calls"]), "limit": budgets["tool_calls"]},
        "tokens": {
            "used": sum(c["usage"]["total_tokens"] for c in calls),
            "limit": budgets["tokens"],
        },
    }
    return report
