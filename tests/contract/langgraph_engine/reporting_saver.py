"""A PostgresSaver that reports the boundaries its commits make durable, and is fenced.

LangGraph saves a finished task's writes (`put_writes`) and each superstep's checkpoint
(`put`), each in a statement pipeline of its own. This subclass runs each in one explicit
transaction that first checks the worker still holds the run's lease (a worker that lost
it commits nothing), and reports through crashcert_probe what the commit made durable:

| saved | boundary |
|---|---|
| the model node's AIMessage with tool calls | `tools.pending` (decision and exact calls) |
| the model node's AIMessage without tool calls | `reply.ready` (the reply, before delivery) |
| the tool node's ToolMessages | `model.ready` (tool round closed) |

Both calls save it: `put_writes` the task's writes, `put` the next checkpoint, whose
channel values hold them too (resumed from it, LangGraph does not run the task again).
With `durability="sync"` LangGraph submits the two to background threads with no order
between them (langchain-ai/langgraph#8039), so each is its own boundary point, reported
with `call` (`put` or `put_writes`) and `commit` (this process's commit count: the order
they committed in). Whichever commits first made the decision durable; a kill at the
first of the two lands between them.

`B:before_commit` is reported from inside the transaction, after the statements ran and
before the COMMIT is sent (crashcert_probe.before_commit).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent_kit import store
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver

import crashcert_probe as probe


def boundary_of(writes: Sequence[tuple[str, Any]]) -> tuple[str | None, dict[str, Any]]:
    """The boundary that saving these task writes makes durable, with its detail."""
    for channel, value in writes:
        if channel != "messages":
            continue
        messages = value if isinstance(value, list) else [value]
        tools = [m for m in messages if isinstance(m, ToolMessage)]
        if tools:
            return "model.ready", {"tool_call_ids": [m.tool_call_id for m in tools]}
        for message in messages:
            if isinstance(message, AIMessage):
                if message.tool_calls:
                    ids = [call["id"] for call in message.tool_calls]
                    return "tools.pending", {"tool_call_ids": ids}
                return "reply.ready", {}
    return None, {}


def boundary_of_checkpoint(checkpoint: Checkpoint) -> tuple[str | None, dict[str, Any]]:
    """The boundary a checkpoint makes durable: what its newest message is the output of.
    A checkpoint of ToolMessages closes the round as the tool node's writes do."""
    messages = checkpoint.get("channel_values", {}).get("messages") or []
    tools: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        tools.insert(0, message)
    if tools:
        return boundary_of([("messages", tools)])
    if messages and isinstance(messages[-1], AIMessage):
        return boundary_of([("messages", [messages[-1]])])
    return None, {}


class ReportingPostgresSaver(PostgresSaver):
    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        # put and put_writes run on LangGraph's background threads; one transaction at a time.
        self._transaction_lock = threading.Lock()
        self._commits = 0

    @contextmanager
    def _fenced(
        self, run_key: str, call: str, boundary: str | None, detail: dict[str, Any]
    ) -> Iterator[None]:
        with self._transaction_lock:
            with self.conn.transaction():
                store.fence(self.conn, run_key)
                yield
                # inside the transaction: the COMMIT is the next thing on the connection
                detail = {**detail, "call": call, "commit": self._commits + 1}
                if boundary is not None:
                    probe.before_commit(boundary, run_key, **detail)
            self._commits += 1
            if boundary is not None:
                probe.report(boundary, run_key, **detail)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        boundary, detail = boundary_of_checkpoint(checkpoint)
        detail["step"] = metadata.get("step")
        with self._fenced(config["configurable"]["thread_id"], "put", boundary, detail):
            return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        boundary, detail = boundary_of(writes)
        with self._fenced(config["configurable"]["thread_id"], "put_writes", boundary, detail):
            super().put_writes(config, writes, task_id, task_path)
