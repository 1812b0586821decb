"""A Pydantic AI agent (`Agent("openai:...")`, which is its OpenAIResponsesModel on the
Responses API) driven by a leased runs table, written from harness/CONTRACT.md and
certified by tests/contract/test_pydantic_ai_engine.py.

    python pydantic_agent.py migrate | worker | submit | status RUN_KEY

A worker claims a run (agent_runs, a lease renewed by a thread), runs the agent on the
run's user message (its system message as the agent's instructions), then posts the output
to the reply sink. Without a durable-execution integration (Temporal, DBOS, Prefect) a run
whose worker died is run again from its input. PYDANTIC_AGENT_VARIANT picks `naive` (as the
docs write an agent, the openai client found by OPENAI_BASE_URL) or `hardened` (each model
answer reserved and recorded, replayed on resume; tool calls journaled by call id; a keyed
reply; the client's own retries off).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from typing import Any

import store

import crashcert_probe as probe

HARDENED = os.environ.get("PYDANTIC_AGENT_VARIANT", "naive") == "hardened"
MODEL = "openai:crashcert-scripted"


def migrate() -> None:
    store.migrate()


def submit() -> None:
    run_input = json.loads(sys.stdin.read())
    store.submit(run_input["run_key"], run_input)
    print(json.dumps({"run_id": run_input["run_key"]}))


def status(run_key: str) -> None:
    found = store.status(run_key)
    report: dict[str, Any] = {
        "run_id": run_key,
        "frontier": {"phase": None, "version": 0},
        "delivery": {"state": "none"},
    }
    if found is not None:
        report = found[1] or report
        report["status"] = found[0]
        report["attempts"] = found[2]
    else:
        report["status"] = "pending"
    print(json.dumps(report))


def deliver(run_key: str, content: str) -> tuple[str, str | None]:
    """Post the reply: (delivery state, key). Naive: no key, sent on every attempt.
    Hardened: key `<run>:reply`, marked `sending` before it leaves; after a crash the sink
    is asked by key, or the run ends `delivery_uncertain` where it cannot be asked."""
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


def build() -> Any:
    import recorded_model
    import world_tools
    from pydantic_ai import Agent, RunContext

    tools = [
        world_tools.make_tool(d, hardened=HARDENED) for d in world_tools.declarations().values()
    ]
    model: Any = recorded_model.build() if HARDENED else MODEL
    agent = Agent(model, deps_type=dict, tools=tools)

    @agent.instructions
    def system(ctx: RunContext[dict[str, Any]]) -> str:
        return str(ctx.deps["system"])

    # Pydantic AI builds its validators on the first run, holding the GIL for seconds under
    # load: the lease thread could not renew, and every first claim lapsed (three attempts
    # of one run, no fault struck). A dry run on TestModel, calling no tool, builds them
    # before any claim.
    # The openai client imports its Responses resources on first use, too.
    from pydantic_ai.models import infer_model
    from pydantic_ai.models.test import TestModel

    with agent.override(model=TestModel(call_tools=[])):
        agent.run_sync("warm up", deps={"run_key": "", "system": ""})
    real = infer_model(model) if isinstance(model, str) else model
    getattr(real, "wrapped", real).client.responses  # noqa: B018 - the attribute imports them
    return agent


def _text(messages: list[dict[str, Any]], role: str) -> str:
    return "\n".join(str(m["content"]) for m in messages if m["role"] == role)


async def run(agent: Any, run_key: str, run_input: dict[str, Any], owner: str) -> None:
    import recorded_model
    from pydantic_ai.usage import UsageLimits

    budgets = run_input["budgets"]
    messages = run_input["messages"]
    recorded_model.TURN.set({"run_key": run_key, "turn": 0})
    deps = {"run_key": run_key, "system": _text(messages, "system")}
    limits = UsageLimits(request_limit=budgets["iterations"] + 1)
    result = await agent.run(_text(messages, "user"), deps=deps, usage_limits=limits)
    if HARDENED:
        report = recorded_model.report(run_key, budgets)
    else:
        report = naive_report(run_key, result, budgets)
    state, key = deliver(run_key, str(result.output))
    final = "succeeded" if state == "delivered" else "delivery_uncertain"
    report.update(status=final, delivery={"state": state, "key": key})
    with store.committed("run.finished" if HARDENED else None, run_key, status=final) as db:
        params = {"run_key": run_key, "owner": owner, "status": final}
        db.execute(store.sql("finish"), {**params, "report": store.jsonb(report)})
        if HARDENED:
            db.execute(store.sql("outbox_settle"), {"run_key": run_key, "state": state})


def naive_report(run_key: str, result: Any, budgets: dict[str, int]) -> dict[str, Any]:
    """What the run's messages know: the answers of this attempt (none of an earlier one)."""
    import recorded_model
    from pydantic_ai.messages import ModelResponse, ToolReturnPart

    messages = result.all_messages()
    calls = [recorded_model.usage_of(m.usage) for m in messages if isinstance(m, ModelResponse)]
    outputs = sum(isinstance(part, ToolReturnPart) for m in messages for part in m.parts)
    # No key is sent, so none can be reported (the contract's tool_calls need one).
    return recorded_model.run_report(run_key, calls, len(calls), [], outputs, budgets)


def keep_lease(run_key: str, owner: str, done: threading.Event) -> None:
    while not done.wait(store.LEASE_S / 4) and store.renew(run_key, owner):
        pass


def worker() -> None:
    store.configure(os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}")
    owner = store.OWNER
    agent = build()  # before any claim: a lease must not lapse while Pydantic AI imports
    idle = threading.Event()
    # One loop for the worker's life: the openai client keeps connections bound to it.
    loop = asyncio.new_event_loop()
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
            loop.run_until_complete(run(agent, run_key, run_input, owner))
        except Exception as error:  # a lost lease or a broken call: the lease lapses, retried
            print(f"run {run_key} attempt {attempt}: {error!r}", file=sys.stderr, flush=True)
        finally:
            done.set()
            renewer.join()


def main(argv: list[str]) -> None:
    commands = {"migrate": migrate, "worker": worker, "submit": submit}
    if argv[1] == "status":
        status(argv[2])
    elif argv[1] in commands:
        commands[argv[1]]()
    else:
        raise SystemExit(f"unknown command {argv[1]!r}")


if __name__ == "__main__":
    main(sys.argv)
