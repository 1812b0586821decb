"""The agent's activities: the model call, the tool calls and the reply, each an HTTP call
to the world (harness/CONTRACT.md section 1). Temporal records an activity's result when
the worker reports it completed; an attempt whose completion never reached the server
(the worker died, or its link to the server broke past the start-to-close timeout) runs
again, on whichever worker polls next: activities are at-least-once.

TEMPORAL_AGENT_KEYS picks the variant:
- `random` (naive, as an agent loop is usually written): each attempt sends a fresh key
  (what an HTTP client that makes its own idempotency keys does per request);
- `derived` (hardened): keys derived from the workflow id and the call (`<run>:<call id>`,
  `<run>:reply`); a tool that cannot honour keys but can be queried, and the reply sink,
  are asked by key before any send.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/contract: agent_kit
from agent_kit import server_steps
from agent_kit.world import http
from temporalio import activity


def keys() -> str:
    """Read per call: a worker forked from a warm server imported this module before its
    own environment was set."""
    return os.environ.get("TEMPORAL_AGENT_KEYS", "random")


@activity.defn
def list_tools() -> list[dict[str, Any]]:
    return http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]  # type: ignore[no-any-return]


@activity.defn
def call_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    status, answer = http(url, {"model": "crashcert", "messages": messages, "tools": tools})
    if status != 200:
        raise RuntimeError(f"model answered {status}: {answer}")
    return answer


@activity.defn
def call_tool(declaration: dict[str, Any], arguments: Any, key: str) -> dict[str, Any]:
    return server_steps.call_tool(declaration, arguments, key, derived=keys() == "derived")


@activity.defn
def deliver(run_id: str, content: str) -> str:
    return server_steps.deliver(run_id, content, derived=keys() == "derived")


ACTIVITIES = [list_tools, call_model, call_tool, deliver]
