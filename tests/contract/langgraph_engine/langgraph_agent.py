"""A LangGraph agent (StateGraph + ToolNode + PostgresSaver) driven by a leased runs table,
written from harness/CONTRACT.md and certified by tests/contract/test_langgraph_engine.py.

    python langgraph_agent.py migrate | worker | submit | status RUN_KEY

A worker claims a run (agent_runs, a lease renewed by a thread), invokes the graph with
thread_id = run key (the input on the first attempt, None to resume from the checkpoint
afterwards), then posts the final answer to the reply sink. LANGGRAPH_AGENT_VARIANT picks
`naive` (what the tutorials write) or `hardened` (keys, journal, reporting checkpointer).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from typing import Any

import store

import crashcert_probe as probe

HARDENED = os.environ.get("LANGGRAPH_AGENT_VARIANT", "naive") == "hardened"


def migrate() -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:
        saver.setup()
    store.migrate()


def submit() -> None:
    run_input = json.loads(sys.stdin.read())
    store.submit(run_input["run_key"], run_input)
    print(json.dumps({"run_id": run_input["run_key"]}))


STATUSES = {"pending": "pending", "running": "running", "succeeded": "succeeded",
            "delivery_uncertain": "delivery_uncertain"}  # fmt: skip


def status(run_key: str) -> None:
    found = store.status(run_key)
    report: dict[str, Any] = {
        "run_id": run_key, "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"}
    }  # fmt: skip
    if found is not None:
        report = found[1] or report
        report["status"] = STATUSES[found[0]]
        report["attempts"] = found[2]
    else:
        report["status"] = "pending"
    print(json.dumps(report))


# --- the worker --------------------------------------------------------------------------


def deliver(run_key: str, content: str) -> tuple[str, str | None]:
    """Post the reply: (delivery state, key). Naive: no key, sent on every attempt.
    Hardened: key `<run>:reply`, marked `sending` before it leaves; a crash in between is
    resolved by asking the sink by key, or ends `uncertain` where it cannot be asked."""
    from world_tools import http

    base = os.environ["CRASHCERT_REPLY_URL"] + "/replies"
    body = {"run_id": run_key, "content": content}
    if not HARDENED:
        http(base, body)
        return "delivered", None
    key = f"{run_key}:reply"
    found = store.execute("outbox_get", run_key=run_key)
    if found and found[0][1] == "delivered":
        return "delivered", key
    if found:
        asked, _ = http(f"{base}/{key}")
        if asked == 200:
            return "delivered", key
        if asked != 404:
            return "uncertain", key  # the sink cannot be asked: never resend blindly
    else:
        with store.committed("reply.sending", run_key, key=key) as db:
            db.execute(store.sql("outbox_sending"), {"run_key": run_key, "key": key})
    http(base, body, key)
    probe.report("reply.sent", run_key, key=key)
    return "delivered", key


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
    state, key = deliver(run_key, messages[-1].content)
    report = agent_graph.report(run_key, messages, budgets, hardened=HARDENED)
    final = "succeeded" if state == "delivered" else "delivery_uncertain"
    report.update(status=final, delivery={"state": state, "key": key})
    with store.committed("run.finished" if HARDENED else None, run_key, status=final) as db:
        params = {"run_key": run_key, "owner": owner, "status": final}
        db.execute(store.sql("finish"), {**params, "report": store.jsonb(report)})
        if HARDENED:
            db.execute(store.sql("outbox_settle"), {"run_key": run_key, "state": state})


def keep_lease(run_key: str, owner: str, done: threading.Event) -> None:
    while not done.wait(store.LEASE_S / 4) and store.renew(run_key, owner):
        pass


def worker() -> None:
    import agent_graph

    store.OWNER = os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}"
    owner = store.OWNER
    # Built before any claim: a lease must not lapse while the graph is being built.
    graph = agent_graph.build(HARDENED)
    idle = threading.Event()
    while True:
        claimed = store.claim(owner)
        if claimed is None:
            idle.wait(0.05)
            continue
        run_key, run_input, attempt = claimed
        done = threading.Event()
        renewer = threading.Thread(target=keep_lease, args=(run_key, owner, done), daemon=True)
        renewer.start()
        try:
            if HARDENED:
                probe.report("run.claimed", run_key, attempt=attempt)
            run(graph, run_key, run_input, owner)
        except Exception as error:  # a lost lease or a broken call: the lease lapses, retried
            print(f"run {run_key} attempt {attempt}: {error!r}", file=sys.stderr, flush=True)
        finally:
            done.set()
            renewer.join()


def main(argv: list[str]) -> None:
    command = argv[1]
    if command == "migrate":
        migrate()
    elif command == "worker":
        worker()
    elif command == "submit":
        submit()
    elif command == "status":
        status(argv[2])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
