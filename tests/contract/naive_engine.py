"""A naive agent engine in plain Python, written from harness/CONTRACT.md alone.

It keeps runs in one table with a lease, but no checkpoints: a recovered run starts over.
So it is at-least-once: after a crash it may call the model again and repeat side effects.
The contract test certifies it to show what the harness reveals about such an engine.

    python naive_engine.py migrate | worker | submit | status RUN_ID
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
import uuid

import psycopg

LEASE_S = int(os.environ.get("CRASHCERT_LEASE_MS", "1000")) / 1000
_control: socket.socket | None = None


def report(boundary: str, run_id: str) -> None:
    global _control
    path = os.environ.get("CRASHCERT_CONTROL")
    if not path:
        return
    if _control is None:
        _control = socket.socket(socket.AF_UNIX)
        _control.connect(path)
    line = {
        "v": 1,
        "boundary": boundary,
        "run_id": run_id,
        "pid": os.getpid(),
        "worker_id": os.environ.get("CRASHCERT_WORKER_ID"),
    }
    _control.sendall(json.dumps(line).encode() + b"\n")
    if not _control.recv(1024):
        os._exit(70)


def http(url: str, body: object | None = None, key: str | None = None) -> tuple[int, object]:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}
    if key:
        headers["Idempotency-Key"] = key
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def connect() -> psycopg.Connection:
    return psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)


def renew(db: psycopg.Connection, run_id: str) -> None:
    db.execute(
        "UPDATE runs SET lease_until = now() + make_interval(secs => %s) WHERE id = %s",
        (LEASE_S, run_id),
    )


def run_agent(db: psycopg.Connection, run_id: str, payload: dict) -> None:
    messages = list(payload["messages"])
    tools = http(os.environ["CRASHCERT_TOOLS_URL"] + "/tools")[1]["tools"]  # type: ignore[index]
    model_url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
    model_calls: list[dict] = []  # what the report says: every call made by this attempt
    tool_calls: list[dict] = []
    while True:
        renew(db, run_id)
        _, answer = http(model_url, {"model": "m", "messages": messages, "tools": tools})
        report("model.returned", run_id)
        model_calls.append(
            {"turn": len(model_calls), "state": "recorded", "usage": answer["usage"]}
        )  # type: ignore[index]
        message = answer["choices"][0]["message"]  # type: ignore[index]
        messages.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            url = f"{os.environ['CRASHCERT_TOOLS_URL']}/tools/{call['function']['name']}"
            renew(db, run_id)
            key = str(uuid.uuid4())  # a new key per attempt: this engine is at-least-once
            status, result = http(url, json.loads(call["function"]["arguments"]), key)
            report("tool.returned", run_id)
            tool_calls.append(
                {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "key": key,
                    "turn": len(model_calls) - 1,
                    "state": "succeeded" if status == 200 else "failed",
                }
            )
            content = (
                {"status": "ok", "result": result["result"]}
                if status == 200
                else {  # type: ignore[index]
                    "status": "error",
                    "error": str(result),
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(content)}
            )
    http(
        os.environ["CRASHCERT_REPLY_URL"] + "/replies",
        {"run_id": run_id, "content": message["content"]},
        key=f"reply-{run_id}",
    )
    report("reply.sent", run_id)
    budgets, tokens = payload["budgets"], sum(c["usage"]["total_tokens"] for c in model_calls)
    final = {
        "run_id": run_id,
        "status": "succeeded",
        "frontier": {"phase": None, "version": 0},
        "delivery": {"state": "delivered", "key": f"reply-{run_id}"},
        "model_calls": model_calls,
        "tool_calls": tool_calls,
        "budget": {
            "iterations": {"used": len(model_calls), "limit": budgets["iterations"]},
            "tool_calls": {"used": len(tool_calls), "limit": budgets["tool_calls"]},
            "tokens": {"used": tokens, "limit": budgets["tokens"]},
        },
    }
    db.execute(
        "UPDATE runs SET status = 'succeeded', report = %s WHERE id = %s",
        (json.dumps(final), run_id),
    )
    report("run.finished", run_id)


def worker() -> None:
    db = connect()
    while True:
        row = db.execute(
            "UPDATE runs SET status = 'running', lease_until = now() + make_interval(secs => %s) "
            "WHERE id = (SELECT id FROM runs WHERE status = 'pending' OR (status = 'running' "
            "AND lease_until < now()) LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, input",
            (LEASE_S,),
        ).fetchone()
        if row is None:
            time.sleep(0.05)
            continue
        report("run.claimed", row[0])
        run_agent(db, row[0], row[1])


def main(command: str) -> None:
    if command == "migrate":
        connect().execute(
            "CREATE TABLE runs (id text PRIMARY KEY, input jsonb NOT NULL, "
            "status text NOT NULL, lease_until timestamptz, report jsonb)"
        )
    elif command == "submit":
        run_id = str(uuid.uuid4())
        connect().execute(
            "INSERT INTO runs (id, input, status) VALUES (%s, %s, 'pending')",
            (run_id, sys.stdin.read()),
        )
        print(json.dumps({"run_id": run_id}))
    elif command == "status":
        row = (
            connect()
            .execute("SELECT status, report FROM runs WHERE id = %s", (sys.argv[2],))
            .fetchone()
        )
        running = {
            "run_id": sys.argv[2],
            "status": "pending" if row[0] == "pending" else "running",
            "frontier": {"phase": None, "version": 0},
            "delivery": {"state": "none"},
        }
        print(json.dumps(row[1] or running))
    elif command == "worker":
        worker()


if __name__ == "__main__":
    main(sys.argv[1])
