"""An agent loop on Temporal (https://github.com/temporalio/sdk-python), written from
harness/CONTRACT.md: a third-party engine whose durable store is the Temporal server, not
our Postgres, certified in black-box mode.

One workflow per run: a model-call activity per turn, an activity per tool call, a reply
activity (temporal_activities.py), the shape Temporal's docs give an agent loop. The
workflow's history in the server is the only durable state; the run report is the
workflow's result.

    python temporal_agent.py migrate | worker | submit | status RUN_ID

The lab starts `temporal server start-dev` for each trial (the engine description's
`server:`) and gives every worker TEMPORAL_ADDRESS through its own Toxiproxy proxy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import temporal_activities as acts

QUEUE = "agent"
# Short: a worker killed in an activity is noticed by the server after this long.
ATTEMPT_TIMEOUT = timedelta(seconds=2)
RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=1)
)
# A workflow task held by a dead worker is handed to another after this long.
TASK_TIMEOUT = timedelta(seconds=2)
CONNECT_TRIES = 50


def _activity_options() -> dict[str, Any]:
    return {"start_to_close_timeout": ATTEMPT_TIMEOUT, "retry_policy": RETRY}


@workflow.defn(name="agent_run")
class AgentRun:
    @workflow.run
    async def run(self, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = workflow.info().workflow_id
        budgets = payload["budgets"]
        messages = list(payload["messages"])
        report: dict[str, Any] = {
            "run_id": run_id, "status": "succeeded", "attempts": 1,
            "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"},
            "model_calls": [], "tool_calls": [],
        }  # fmt: skip
        declarations = await workflow.execute_activity(acts.list_tools, **_activity_options())
        by_name = {d["function"]["name"]: d for d in declarations}
        tools = [{"type": d["type"], "function": d["function"]} for d in declarations]
        while True:
            answer = await workflow.execute_activity(
                acts.call_model, args=[messages, tools], **_activity_options()
            )
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
                done = await workflow.execute_activity(
                    acts.call_tool,
                    args=[
                        by_name[name],
                        json.loads(call["function"]["arguments"]),
                        f"{run_id}:{call['id']}",
                    ],
                    **_activity_options(),
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
        key = await workflow.execute_activity(
            acts.deliver, args=[run_id, message["content"]], **_activity_options()
        )
        report["delivery"] = {"state": "delivered", "key": key}
        calls = report["model_calls"]
        report["budget"] = {
            "iterations": {"used": len(calls), "limit": budgets["iterations"]},
            "tool_calls": {"used": len(report["tool_calls"]), "limit": budgets["tool_calls"]},
            "tokens": {
                "used": sum(c["usage"]["total_tokens"] for c in calls),
                "limit": budgets["tokens"],
            },
        }
        return report


# --- commands ----------------------------------------------------------------------------


def log(message: str) -> None:
    """One line on stderr, which the harness keeps as this worker's log."""
    print(f"temporal_agent {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


async def connect() -> Any:
    """The client; the server (or the worker's proxy to it) may still be coming up."""
    from temporalio.client import Client

    address = os.environ["TEMPORAL_ADDRESS"]
    for attempt in range(CONNECT_TRIES):
        try:
            return await Client.connect(address)
        except RuntimeError as error:  # the SDK's connect error
            if attempt == CONNECT_TRIES - 1:
                raise
            log(f"connect to {address} failed ({error}); again")
            await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def worker() -> None:
    from temporalio.worker import Worker

    client = await connect()
    identity = os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}"
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as executor:
        running = Worker(
            client,
            task_queue=QUEUE,
            workflows=[AgentRun],
            activities=acts.ACTIVITIES,
            activity_executor=executor,
            identity=identity,
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        )
        log(f"worker {identity} polling {QUEUE!r} (keys: {acts.keys()})")
        await running.run()


async def submit() -> None:
    client = await connect()
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    await client.start_workflow(
        "agent_run",
        json.loads(sys.stdin.read()),
        id=run_id,
        task_queue=QUEUE,
        task_timeout=TASK_TIMEOUT,
    )
    print(json.dumps({"run_id": run_id}))


async def status(run_id: str) -> None:
    from temporalio.client import WorkflowExecutionStatus as S

    client = await connect()
    handle = client.get_workflow_handle(run_id)
    described = await handle.describe()
    report: dict[str, Any] = {
        "run_id": run_id, "frontier": {"phase": None, "version": 0}, "delivery": {"state": "none"},
        "status": "running",
    }  # fmt: skip
    if described.status == S.COMPLETED:
        report = await handle.result()
    elif described.status in (S.FAILED, S.TIMED_OUT, S.TERMINATED):
        report["status"] = "failed"
    elif described.status == S.CANCELED:
        report["status"] = "cancelled"
    print(json.dumps(report))


def main(argv: list[str]) -> None:
    command = argv[1]
    if command == "migrate":
        return  # the Temporal server is the store: nothing to create in Postgres
    if command == "worker":
        asyncio.run(worker())
    elif command in ("submit", "status"):
        asyncio.run(submit() if command == "submit" else status(argv[2]))
        # The SDK's Rust runtime keeps threads that can abort the interpreter's own
        # finalization (PyGILState_Release): the answer is printed, leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv)
