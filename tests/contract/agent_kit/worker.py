"""An example agent's commands (`migrate | worker | submit | status RUN_KEY`) and its
worker loop: claim a run from agent_runs, renew its lease from a thread, run the agent,
finish the run (post the reply, then save the final report in a fenced transaction).

A worker forked from the warm server (the description's `preload`) inherits every module as
the server imported it, with the server's environment: `serve` calls store.configure, which
reads the worker's owner id and lease then, never at import.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import crashcert_probe as probe
from agent_kit import reply, store

Agent = TypeVar("Agent")
# run(agent, run_key, run input, owner): one attempt of a run, finished by `finish`.
Run = Callable[[Agent, str, dict[str, Any], str], None]
AsyncRun = Callable[[Agent, str, dict[str, Any], str], Coroutine[Any, Any, None]]


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


def finish(
    run_key: str, owner: str, report: dict[str, Any], content: str, *, hardened: bool
) -> None:
    """Post the reply, then save the run's final status and report (hardened: `run.finished`
    at its commit, and the outbox settled in the same transaction)."""
    state, key = reply.deliver(run_key, content, hardened=hardened)
    final = "succeeded" if state == "delivered" else "delivery_uncertain"
    report.update(status=final, delivery={"state": state, "key": key})
    with store.committed("run.finished" if hardened else None, run_key, status=final) as db:
        params = {"run_key": run_key, "owner": owner, "status": final}
        db.execute(store.sql("finish"), {**params, "report": store.jsonb(report)})
        if hardened:
            db.execute(store.sql("outbox_settle"), {"run_key": run_key, "state": state})


def keep_lease(run_key: str, owner: str, done: threading.Event) -> None:
    while not done.wait(store.LEASE_S / 4) and store.renew(run_key, owner):
        pass


def serve(build: Callable[[], Agent], run: Run[Agent], *, hardened: bool) -> None:
    """The worker: `build()` before any claim (a lease must not lapse while a framework
    imports or warms up), then one claimed run after another, forever."""
    store.configure(os.environ.get("CRASHCERT_WORKER_ID") or f"w-{uuid.uuid4().hex[:8]}")
    owner = store.OWNER
    agent = build()
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
            if hardened:
                probe.report("run.claimed", run_key, attempt=attempt)
            run(agent, run_key, run_input, owner)
        except Exception as error:  # a lost lease or a broken call: the lease lapses, retried
            print(f"run {run_key} attempt {attempt}: {error!r}", file=sys.stderr, flush=True)
        finally:
            done.set()
            renewer.join()


def serve_async(build: Callable[[], Agent], run: AsyncRun[Agent], *, hardened: bool) -> None:
    """`serve` for a framework whose run is a coroutine: one event loop for the worker's
    life, since the openai client keeps its connections bound to the loop it first ran on."""
    loop = asyncio.new_event_loop()

    def attempt(agent: Agent, run_key: str, run_input: dict[str, Any], owner: str) -> None:
        loop.run_until_complete(run(agent, run_key, run_input, owner))

    serve(build, attempt, hardened=hardened)


def main(argv: list[str], *, worker: Callable[[], None], migrate: Callable[[], None]) -> None:
    commands = {"migrate": migrate, "worker": worker, "submit": submit}
    if argv[1] == "status":
        status(argv[2])
    elif argv[1] in commands:
        commands[argv[1]]()
    else:
        raise SystemExit(f"unknown command {argv[1]!r}")
