"""A LangGraph agent (StateGraph + ToolNode + PostgresSaver) driven by a leased runs table,
written from harness/CONTRACT.md and certified by tests/contract/test_langgraph_engine.py.

    python langgraph_agent.py migrate | worker | submit | status RUN_KEY

A worker claims a run (agent_runs, a lease renewed by a thread), invokes the graph with
thread_id = run key (the input on the first attempt, None to resume from the checkpoint
afterwards), then posts the final answer to the reply sink. LANGGRAPH_AGENT_VARIANT picks
`naive` (what the tutorials write) or `hardened` (keys, journal, reporting checkpointer).
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/contract: agent_kit
from agent_kit import store
from agent_kit import worker as agent_worker

HARDENED = os.environ.get("LANGGRAPH_AGENT_VARIANT", "naive") == "hardened"


def migrate() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
    store.migrate()


def run(graph: Any, run_key: str, run_input: dict[str, Any], owner: str) -> None:
    import agent_graph

    config = {"configurable": {"thread_id": run_key}}
    started = bool(graph.get_state(config).values)
    first = None if started else {"messages": run_input["messages"]}
    budgets = run_input["budgets"]
    durability = "sync" if HARDENED else None  # None: LangGraph's default ("async")
    for values in graph.stream(first, config, stream_mode="values", durability=durability):
        report = agent_graph.report(run_key, values["messages"], budgets, hardened=HARDENED)
        store.save_report(run_key, owner, report)
    messages = graph.get_state(config).values["messages"]
    report = agent_graph.report(run_key, messages, budgets, hardened=HARDENED)
    agent_worker.finish(run_key, owner, report, messages[-1].content, hardened=HARDENED)


def worker() -> None:
    import agent_graph

    # store.configure (in serve) before the graph is built: its checkpointer's connection
    # takes the worker's lease, not the one the warm server imported with.
    agent_worker.serve(lambda: agent_graph.build(HARDENED), run, hardened=HARDENED)


if __name__ == "__main__":
    agent_worker.main(sys.argv, worker=worker, migrate=migrate)
