"""langchain-ai/langgraph#8039 forced: under durability="sync" LangGraph submits a task's
`put_writes` and the next checkpoint's `put` to background threads with no order between
them. One graph, START -> effect -> after -> END; `effect` appends a line to a file (its
side effect). The saver delays one side of the race and SIGKILLs the process at a point
of the step-1 checkpoint (the one after `effect`); a fresh process resumes the thread.

    python race_8039.py start|resume   (DATABASE_URL, EFFECTS, THREAD, DELAY, KILL)

DELAY: `put_writes` or `put` (sleep first, so the other wins). KILL: `put_entry` (put was
called, nothing of it committed) or `put_committed` (the checkpoint committed, the writes
may not have). The resume prints what it found: `next` and whether the task's writes
were saved.
"""

from __future__ import annotations

import json
import operator
import os
import signal
import sys
import time
from typing import Annotated, Any, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row

DELAY_S = 0.3
STEP = 1  # the checkpoint after `effect`


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def effect(state: State) -> dict[str, Any]:
    with open(os.environ["EFFECTS"], "a") as file:
        file.write("effect\n")
        file.flush()
        os.fsync(file.fileno())
    return {"log": ["effect"]}


def after(state: State) -> dict[str, Any]:
    return {"log": ["after"]}


class RacingSaver(PostgresSaver):
    def __init__(self, conn: Any, *, kill: str | None, delay: str | None) -> None:
        super().__init__(conn)
        self.kill, self.delay = kill, delay

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        ours = metadata.get("step") == STEP
        if ours and self.delay == "put":
            time.sleep(DELAY_S)
        if ours and self.kill == "put_entry":
            os.kill(os.getpid(), signal.SIGKILL)
        saved = super().put(config, checkpoint, metadata, new_versions)
        if ours and self.kill == "put_committed":
            os.kill(os.getpid(), signal.SIGKILL)
        return saved

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.delay == "put_writes" and any(channel == "log" for channel, _ in writes):
            time.sleep(DELAY_S)
        super().put_writes(config, writes, task_id, task_path)


def main(phase: str) -> None:
    conn = psycopg.connect(
        os.environ["DATABASE_URL"], autocommit=True, prepare_threshold=0, row_factory=dict_row
    )
    starting = phase == "start"
    saver = RacingSaver(
        conn,
        kill=os.environ.get("KILL") if starting else None,
        delay=os.environ.get("DELAY") if starting else None,
    )
    saver.setup()
    graph = StateGraph(State)
    graph.add_node("effect", effect)
    graph.add_node("after", after)
    graph.add_edge(START, "effect")
    graph.add_edge("effect", "after")
    graph.add_edge("after", END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": os.environ["THREAD"]}}
    if starting:
        app.invoke({"log": []}, config, durability="sync")
        return
    state = app.get_state(config)
    found = {"next": list(state.next), "writes_saved": [t.name for t in state.tasks if t.result]}
    app.invoke(None, config, durability="sync")
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
