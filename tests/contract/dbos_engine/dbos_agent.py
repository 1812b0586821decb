"""An agent loop on DBOS Transact (https://github.com/dbos-inc/dbos-transact-py), written
from harness/CONTRACT.md: a third-party engine certified in black-box mode.

One DBOS workflow per run: a model-call step per turn, a step per tool call, a reply step.
DBOS records each step's output in Postgres after the step returns, so a step interrupted
between its effect and that record runs again on recovery (steps are at-least-once).

    python dbos_agent.py migrate | worker | submit | status RUN_ID

Variants (env DBOS_AGENT_KEYS and DBOS_AGENT_BUDGET in the description files):
- `random`: each tool/reply attempt sends a fresh idempotency key (what a step that makes
  its own HTTP call does by default);
- `derived`: keys derived from the workflow id and the step (`<run>:<call id>`,
  `<run>:reply`); a tool that cannot honour keys but can be queried, and the reply sink,
  are asked by key before a repeat;
- `DBOS_AGENT_BUDGET=reserve` (dbos_engine_reserved.yaml): each model attempt is counted in
  a table before its request leaves, so an answer lost in a crash is still billed.

Workers: DBOS executor id = CRASHCERT_WORKER_ID; each worker heartbeats into a table and
recovers (re-enqueues) the PENDING workflows of executors whose heartbeat is older than
CRASHCERT_LEASE_MS. DBOS's own recovery only runs at start-up of the same executor id.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import threading
import time
import urllib.parse
import uuid
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/contract: agent_kit
import psycopg
import psycopg.conninfo
from agent_kit.world import http

APP = "crashcert-dbos-agent"
VERSION = "crashcert-1"
QUEUE = "agent"
LEASE_S = int(os.environ.get("CRASHCERT_LEASE_MS", "1000")) / 1000
KEYS = os.environ.get("DBOS_AGENT_KEYS", "random")
# `reserve`: count each model attempt in a table before the request leaves, so an answer
# lost in a crash is still billed as an iteration; `steps`: count recorded steps only.
BUDGET = os.environ.get("DBOS_AGENT_BUDGET", "steps")
TABLES = """
CREATE TABLE IF NOT EXISTS agent_heartbeats (executor_id text PRIMARY KEY, seen timestamptz);
CREATE TABLE IF NOT EXISTS agent_reports (run_id text PRIMARY KEY, report jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS agent_budget (run_id text PRIMARY KEY, iterations int NOT NULL);
"""


def database_url(dsn: str) -> str:
    """DATABASE_URL may be a libpq key=value string; DBOS (SQLAlchemy) wants a URL."""
    if "://" in dsn:
        return dsn
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    user = urllib.parse.quote(str(parts.get("user", "")), safe="")
    password = parts.get("password")
    auth = f"{user}:{urllib.parse.quote(str(password), safe='')}@" if password else f"{user}@"
    host, port, name = parts.get("host", "localhost"), parts.get("port", 5432), parts["dbname"]
    return f"postgresql://{auth}{host}:{port}/{name}"


def dbos_config(dsn: str, executor_id: str) -> Any:
    return {
        "name": APP,
        "system_database_url": database_url(dsn),
        "executor_id": executor_id,
        "application_version": VERSION,
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": 0.05,
    }


# --- the workflow (registered when a worker imports DBOS) ------------------------------


def define_workflow(DBOS: Any) -> Any:
    @DBOS.step()
    def list_tools() -> list[dict[str, Any]]:
        return http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]  # type: ignore[no-any-return]

    @DBOS.step()
    def call_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
        if BUDGET == "reserve":
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db:
                db.execute(
                    "INSERT INTO agent_budget VALUES (%s, 1) ON CONFLICT (run_id) "
                    "DO UPDATE SET iterations = agent_budget.iterations + 1",
                    (DBOS.workflow_id,),
                )
        status, answer = http(url, {"model": "crashcert", "messages": messages, "tools": tools})
        if status != 200:
            raise RuntimeError(f"model answered {status}: {answer}")
        return answer

    @DBOS.step()
    def call_tool(declaration: dict[str, Any], arguments: Any, key: str) -> dict[str, Any]:
        name = declaration["function"]["name"]
        base = f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{name}"
        if KEYS == "random":
            key = str(uuid.uuid4())
        elif declaration.get("queryable") and not declaration.get("honours_idempotency_key"):
            found_status, found = http(f"{base}/effects/{key}")
            if found_status == 200 and found.get("applied"):
                return {"key": key, "content": {"status": "ok", "result": found.get("result")}}
        status, answer = http(base, arguments, key)
        if status == 200:
            return {"key": key, "content": {"status": "ok", "result": answer["result"]}}
        return {"key": key, "content": {"status": "error", "error": str(answer)}}

    @DBOS.step()
    def deliver(run_id: str, content: str) -> str:
        key = str(uuid.uuid4()) if KEYS == "random" else f"{run_id}:reply"
        base = os.environ["CRASHCERT_REPLY_URL"] + "/replies"
        if KEYS == "derived":
            status, _ = http(f"{base}/{key}")
            if status == 200:
                return key  # delivered before the crash: never twice
        http(base, {"run_id": run_id, "content": content}, key)
        return key

    @DBOS.step()
    def save_report(report: dict[str, Any]) -> None:
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db:
            reserved = db.execute(
                "SELECT iterations FROM agent_budget WHERE run_id = %s", (report["run_id"],)
            ).fetchone()
            if reserved and "budget" in report:
                iterations = report["budget"]["iterations"]
                iterations["used"] = max(iterations["used"], reserved[0])
            db.execute(
                "INSERT INTO agent_reports (run_id, report) VALUES (%s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET report = excluded.report",
                (report["run_id"], json.dumps(report)),
            )

    @DBOS.workflow(name="agent_run")
    def agent_run(payload: dict[str, Any]) -> dict[str, Any]:
        run_id = DBOS.workflow_id
        log(f"workflow {run_id}: (re)started on this executor")
        budgets = payload["budgets"]
        messages = list(payload["messages"])
        report: dict[str, Any] = {
            "run_id": run_id, "status": "running", "attempts": 1,
            "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"},
            "model_calls": [], "tool_calls": [],
        }  # fmt: skip

        def budget() -> dict[str, Any]:
            calls = report["model_calls"]
            return {
                "iterations": {"used": len(calls), "limit": budgets["iterations"]},
                "tool_calls": {"used": len(report["tool_calls"]), "limit": budgets["tool_calls"]},
                "tokens": {
                    "used": sum(c["usage"]["total_tokens"] for c in calls),
                    "limit": budgets["tokens"],
                },
            }

        declarations = list_tools()
        by_name = {d["function"]["name"]: d for d in declarations}
        tools = [{"type": d["type"], "function": d["function"]} for d in declarations]
        while True:
            answer = call_model(messages, tools)
            message = answer["choices"][0]["message"]
            turn = len(report["model_calls"])
            report["model_calls"].append(
                {"turn": turn, "state": "recorded", "usage": answer["usage"]}
            )
            messages.append(message)
            if not message.get("tool_calls"):
                break
            for call in message["tool_calls"]:
                name = call["function"]["name"]
                done = call_tool(
                    by_name[name],
                    json.loads(call["function"]["arguments"]),
                    f"{run_id}:{call['id']}",
                )
                report["tool_calls"].append(
                    {"id": call["id"], "name": name, "key": done["key"], "turn": turn,
                     "state": "succeeded" if done["content"]["status"] == "ok" else "failed"}
                )  # fmt: skip
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": json.dumps(done["content"]),
                    }
                )
            report["budget"] = budget()
            save_report(report)
        key = deliver(run_id, message["content"])
        report.update(status="succeeded", delivery={"state": "delivered", "key": key})
        report["budget"] = budget()
        save_report(report)
        return report

    return agent_run


# --- commands ----------------------------------------------------------------------------


def migrate() -> None:
    from dbos import DBOS

    dsn = os.environ["DATABASE_URL"]
    DBOS(config=dbos_config(dsn, "migrate"))
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=0.05)
    DBOS.destroy()
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(TABLES)


def log(message: str) -> None:
    """One line on stderr, which the harness keeps as this worker's log."""
    print(f"dbos_agent {time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} "
          f"{message}", file=sys.stderr, flush=True)  # fmt: skip


def beat(db: psycopg.Connection[Any], executor: str) -> None:
    db.execute(
        "INSERT INTO agent_heartbeats VALUES (%s, now()) "
        "ON CONFLICT (executor_id) DO UPDATE SET seen = now()",
        (executor,),
    )


def recover_dead_executors(db: psycopg.Connection[Any], DBOS: Any) -> None:
    """Re-enqueue the PENDING workflows of executors whose heartbeat is stale.

    The stale rows stay locked while their workflows are re-enqueued and are deleted in the
    same transaction: a recovering worker that dies half-way leaves the rows for the next
    one (re-enqueueing twice is a no-op: DBOS only takes PENDING workflows of that executor).
    """
    with db.transaction():
        dead = db.execute(
            "SELECT executor_id FROM agent_heartbeats "
            "WHERE seen < now() - make_interval(secs => %s) FOR UPDATE SKIP LOCKED",
            (LEASE_S,),
        ).fetchall()
        for (executor_id,) in dead:
            handles = DBOS._recover_pending_workflows([executor_id])  # re-enqueues them
            log(f"executor {executor_id} is dead: re-enqueued "
                f"{[h.get_workflow_id() for h in handles]}")  # fmt: skip
        if dead:
            db.execute(
                "DELETE FROM agent_heartbeats WHERE executor_id = ANY(%s)",
                ([executor_id for (executor_id,) in dead],),
            )


def worker() -> None:
    from dbos import DBOS

    dsn = os.environ["DATABASE_URL"]
    executor = os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    with psycopg.connect(dsn, autocommit=True) as db:
        # Known alive before the first dequeue: a worker killed before its first periodic
        # beat would otherwise never be seen as dead, and its run never recovered.
        beat(db, executor)
        DBOS(config=dbos_config(dsn, executor))
        define_workflow(DBOS)
        DBOS.launch()
        DBOS.register_queue(QUEUE, polling_interval_sec=0.05)
        log(f"executor {executor} launched; polling queue {QUEUE!r}")
        while not stop.wait(LEASE_S / 4):
            beat(db, executor)
            recover_dead_executors(db, DBOS)


def submit() -> None:
    from dbos import DBOSClient

    client = DBOSClient(
        system_database_url=database_url(os.environ["DATABASE_URL"]), application_name=APP
    )
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    options: Any = {
        "queue_name": QUEUE, "workflow_name": "agent_run", "workflow_id": run_id,
        "app_version": VERSION,
    }  # fmt: skip
    client.enqueue(options, json.loads(sys.stdin.read()))
    client.destroy()
    print(json.dumps({"run_id": run_id}))


STATUSES = {"ENQUEUED": "pending", "PENDING": "running", "SUCCESS": "succeeded",
            "ERROR": "failed", "CANCELLED": "cancelled", "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            "dead_lettered"}  # fmt: skip


def status(run_id: str) -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as db:
        row = db.execute(
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (run_id,)
        ).fetchone()
        saved = db.execute(
            "SELECT report FROM agent_reports WHERE run_id = %s", (run_id,)
        ).fetchone()
    report = saved[0] if saved else {
        "run_id": run_id, "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"}
    }  # fmt: skip
    state = STATUSES.get(row[0] if row else "ENQUEUED", "running")
    if state != "succeeded" and report.get("status") == "succeeded":
        state = "running"  # the workflow's own end is not recorded yet
    report["status"] = state
    print(json.dumps(report))


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
