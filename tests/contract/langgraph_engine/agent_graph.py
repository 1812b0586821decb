"""The agent as a LangGraph user writes it: a StateGraph of a model node and a ToolNode,
checkpointed by PostgresSaver, resumed with thread id = run key.

Hardened differences, all outside the graph's shape: the checkpointer reports boundaries
and is fenced by the run's lease (reporting_saver.py), each model attempt is counted in a
table before its request leaves (so an answer lost in a crash is still billed) and the
model client's own retries are off (a retry would re-send a lost request under the one
attempt counted for it), tool calls go through the guard (world_tools.py), and checkpoints
are written synchronously.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
import reporting_saver
import world_tools
from agent_kit import report as run_reports
from agent_kit import store, world
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from psycopg.rows import dict_row

import crashcert_probe as probe


def checkpointer(hardened: bool) -> PostgresSaver:
    conn = psycopg.connect(
        os.environ["DATABASE_URL"], autocommit=True, prepare_threshold=0,
        row_factory=dict_row, options=store.OPTIONS,
    )  # fmt: skip
    if hardened:
        return reporting_saver.ReportingPostgresSaver(conn)
    return PostgresSaver(conn)


def chat_model(hardened: bool) -> ChatOpenAI:
    """The model as the tutorials build it; hardened, with the openai client's own retries
    off: its default (max_retries=2) re-sent a lost request from a live worker under the one
    attempt counted for it, so the world answered more requests than were billed."""
    retries = {"max_retries": 0} if hardened else {}
    return ChatOpenAI(
        model="crashcert",
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],  # type: ignore[arg-type]
        timeout=30,
        **retries,  # type: ignore[arg-type]
    )


def build(hardened: bool) -> Any:
    declarations = world.declarations()
    tools = [world_tools.make_tool(d) for d in declarations.values()]
    model = chat_model(hardened).bind_tools(tools)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        run_key = config["configurable"]["thread_id"]
        if hardened:
            with store.committed("model.pending", run_key) as db:
                db.execute(store.sql("reserve_model"), {"run_key": run_key})
        answer = model.invoke(state["messages"])
        if hardened:
            probe.report("model.returned", run_key)
        return {"messages": [answer]}

    wrap = world_tools.guard(declarations) if hardened else None
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools, wrap_tool_call=wrap))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer(hardened))


def _usage(message: AIMessage) -> dict[str, int]:
    usage: Any = message.usage_metadata or {}
    return {
        "prompt_tokens": usage.get("input_tokens", 0),
        "completion_tokens": usage.get("output_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
    }


def report(
    run_key: str, messages: list[AnyMessage], budgets: dict[str, int], *, hardened: bool
) -> dict[str, Any]:
    """The RunReport of what the thread's state holds (and, hardened, the agent's tables)."""
    answers = [m for m in messages if isinstance(m, AIMessage)]
    usages = [_usage(m) for m in answers]
    if hardened:
        turns = {call["id"]: turn for turn, m in enumerate(answers) for call in m.tool_calls}
        return run_reports.from_tables(run_key, usages, turns, budgets)
    # No key is sent, so none can be reported (the contract's tool_calls need one): the
    # report lists no calls and counts the answered ones.
    outputs = sum(isinstance(m, ToolMessage) for m in messages)
    return run_reports.run_report(run_key, usages, len(usages), [], outputs, budgets)
