"""The hardened shape for a framework without durable resume: each model answer reserved
and recorded in Postgres, and the run replayed from them.

The n-th model request of a run (a run is run again from its input after a crash, and
every earlier request is answered from the table, so n is the turn) is answered from
`agent_model_answers` when it was recorded; otherwise an attempt is counted in
`agent_model_attempts` before the request leaves (`model.pending`: an answer lost in a
crash is still billed), and the answer is recorded before it is used (`tools.pending` with
tool calls, `reply.ready` without: the decision). The model client's own retries must be
off (`max_retries=0`): a retry would re-send a lost request under the one attempt reserved
for it (harness/CONTRACT.md, "Certifying a framework").
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import crashcert_probe as probe
from agent_kit import store

Answer = TypeVar("Answer")
# {"run_key", "turn"} of the run this task runs (the agent's run sets it per attempt).
TURN: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("turn")


def start(run_key: str) -> None:
    """In an attempt's task, before the framework asks the model: turns count from 0."""
    TURN.set({"run_key": run_key, "turn": 0})


async def recorded(
    ask: Callable[[], Awaitable[Answer]],
    restore: Callable[[dict[str, Any]], Answer],
    record: Callable[[Answer], tuple[dict[str, Any], bool]],
) -> Answer:
    """This turn's answer: `restore`d from the table, or `ask`ed once and recorded
    (`record(answer)`: the JSON to keep, and whether it calls tools)."""
    where = TURN.get()
    run_key, turn = where["run_key"], where["turn"]
    where["turn"] = turn + 1
    found = store.execute("answer_get", run_key=run_key, turn=turn)
    if found:
        return restore(found[0][0])
    with store.committed("model.pending", run_key, turn=turn) as db:
        db.execute(store.sql("reserve_model"), {"run_key": run_key})
    answer = await ask()
    probe.report("model.returned", run_key, turn=turn)
    kept, calls_tools = record(answer)
    with store.committed(
        "tools.pending" if calls_tools else "reply.ready", run_key, turn=turn
    ) as db:
        db.execute(
            store.sql("answer_record"),
            {"run_key": run_key, "turn": turn, "answer": store.jsonb(kept)},
        )
    return answer
