"""The contract engine's worker: claim a run, then move it from checkpoint to checkpoint.

Each `advance` re-reads the run under its lease and does the one next thing its durable
state asks for: an inference (phase null, model_ready, or an interrupted model_pending), the
next unsettled tool call of a decision (tools_pending), or the delivery of the reply
(reply_ready). So a worker recovering a run and a worker continuing it take the same path.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg

from . import store as store_module
from . import world
from .store import Fenced, Lease, Store

SETTLED = {"succeeded", "failed", "outcome_unknown", "rejected", "cancelled"}
# Waits before sending a not-applied tool call again under the same lease (~6 s in all:
# longer than a healed cut or a short outage); then the call is tried again later.
RETRY_WAITS_S = (0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0)
# A model request that was refused (never left) is sent again under the same inference,
# as long as the tool calls above; one the provider answered 5xx (nothing billed) a few
# times only. Then the attempt ends: the run is given back (CONTRACT.md s. 5).
MODEL_5XX_RETRIES = 2
# A model answer lost on its way (the request may have been served and billed) costs a new
# inference; after this many in one attempt the run is given back too.
LOST_ANSWERS_PER_ATTEMPT = 3


class RetryLater(Exception):
    """The world did not answer; the run is tried again from its durable state."""


class Worker:
    def __init__(self) -> None:
        self.store = Store()
        # Effects this process marked started but has not sent yet, by (run, key, epoch): after
        # a lost connection under the same lease they are known not to have happened.
        self.unsent: set[tuple[str, str, int]] = set()
        self.declarations: dict[str, dict[str, Any]] = {}
        # Model answers lost under each lease (run, epoch).
        self.lost_answers: dict[tuple[str, int], int] = {}

    def run_forever(self) -> None:
        while True:
            try:
                lease = self.store.claim()
            except psycopg.Error as error:
                self.reconnect(error)
                continue
            if lease is None:
                time.sleep(0.1)
                continue
            world.report("run.claimed", lease.run_id, {"epoch": lease.epoch})
            self.work(lease)

    def work(self, lease: Lease) -> None:
        while True:
            try:
                if not self.declarations:
                    self.declarations = world.tools()
                self.advance(lease)
            except Fenced:
                return  # finished, or another worker holds the run now
            except psycopg.Error as error:
                self.reconnect(error)
            except (RetryLater, OSError):
                time.sleep(0.2)

    def reconnect(self, error: psycopg.Error) -> None:
        """A lost connection is opened again; the next step fences first. Other errors are bugs."""
        if not self.store.lost(error):
            raise error
        self.store.reset()
        time.sleep(0.1)

    def advance(self, lease: Lease) -> None:
        run = self.store.fence(lease)
        if run["attempts"] > run["max_attempts"]:
            self.finish(lease, "dead_lettered", "max_attempts")
        elif run["delivery_state"] in ("pending", "sending"):
            self.deliver(lease, run)
        elif run["phase"] == "tools_pending":
            self.execute_tools(lease, run)
        else:
            self.infer(lease, run)

    # -- the model ---------------------------------------------------------------------------

    def infer(self, lease: Lease, run: dict[str, Any]) -> None:
        if run["iterations_used"] >= run["iterations_limit"]:
            return self.finish(lease, "budget_exhausted", "iterations")
        if run["tokens_used"] >= run["tokens_limit"]:
            return self.finish(lease, "budget_exhausted", "tokens")
        with self.store.step(lease, "model.pending") as step:
            step.execute("interrupt_model_calls")  # a call whose answer was lost: not billed
            seq = step.execute("reserve_model_call", turn=run["turn"])[0]["seq"]
            step.checkpoint("model_pending", iterations=1)
        self.store.hold(lease)  # a worker woken after losing its lease stops here
        with self.store.kept(lease):
            status, answer = self.ask_model(run["transcript"])
        message, usage = parse_answer(answer) if status == 200 else (None, None)
        if message is not None and usage is not None:
            world.report("model.returned", lease.run_id, {"turn": run["turn"]})
            return self.decide(lease, seq, message, usage)
        if status == world.REFUSED or unavailable(status):
            return self.give_back(lease, run, seq, f"model answered {status}")
        if 400 <= status < 500:  # the provider refused the request: no retry changes that
            with self.store.step(lease, "run.finished") as step:
                step.execute("fail_model_call", seq=seq)
                step.execute(
                    "finish",
                    status="failed",
                    reason=f"model answered {status}",
                    delivery_state=None,
                )
            return None
        # The answer was lost on its way (or came back malformed): it may have been billed, so
        # it is not used; the next inference is a new model call after a pause.
        mine = (lease.run_id, lease.epoch)
        self.lost_answers[mine] = self.lost_answers.get(mine, 0) + 1
        if self.lost_answers[mine] > LOST_ANSWERS_PER_ATTEMPT:
            return self.give_back(lease, run, seq, "model answers lost")
        with self.store.step(lease, None) as step:
            step.execute("fail_model_call", seq=seq)
        with self.store.kept(lease):
            time.sleep(0.5)
        return None

    def ask_model(self, transcript: list[dict[str, Any]]) -> tuple[int, Any]:
        """One inference: a refused request is sent again while the link may heal, a 5xx a
        few times; the last status and body."""
        tools, refused, failed = list(self.declarations.values()), 0, 0
        while True:
            status, answer = world.chat(transcript, tools)
            if status == world.REFUSED and refused < len(RETRY_WAITS_S):
                time.sleep(RETRY_WAITS_S[refused])
                refused += 1
            elif unavailable(status) and failed < MODEL_5XX_RETRIES:
                time.sleep(RETRY_WAITS_S[failed])
                failed += 1
            else:
                return status, answer

    def give_back(self, lease: Lease, run: dict[str, Any], seq: int, reason: str) -> None:
        """Ends this attempt, not the run: the run is released for a later attempt, or, on
        its last attempt, ends dead_lettered (CONTRACT.md s. 5, "Attempts and dead letters")."""
        last = run["attempts"] >= run["max_attempts"]
        boundary, detail = ("run.finished", {"status": "dead_lettered"}) if last else (None, {})
        with self.store.step(lease, boundary, **detail) as step:
            step.execute("fail_model_call", seq=seq)
            if last:
                step.execute("finish", status="dead_lettered", reason=reason, delivery_state=None)
            else:
                step.execute("release", backoff_ms=store_module.lease_ms())
        self.lost_answers.pop((lease.run_id, lease.epoch), None)
        raise Fenced(lease.run_id)  # the run is no longer this worker's

    def decide(self, lease: Lease, seq: int, message: dict[str, Any], usage: dict) -> None:
        """Records the answer, bills its tokens once and checkpoints what it decided."""
        calls, content = message.get("tool_calls") or [], message.get("content")
        assistant = {"role": "assistant", "content": content}
        if calls:
            assistant["tool_calls"] = calls
        tokens = int(usage.get("total_tokens", 0))
        with self.store.step(lease, "tools.pending") as step:
            run = step.run
            step.execute("record_model_call", seq=seq, usage=usage)
            if run["tokens_used"] + tokens > run["tokens_limit"] or not (calls or content):
                # Billed, but nothing the answer decided is acted on.
                step.boundary = "run.finished"
                step.execute("bill_tokens", tokens=tokens)
                over = run["tokens_used"] + tokens > run["tokens_limit"]
                step.execute(
                    "finish",
                    status="budget_exhausted" if over else "failed",
                    reason="tokens" if over else "empty model answer",
                    delivery_state=None,
                )
            elif calls:
                for idx, call in enumerate(calls):
                    step.execute(
                        "add_tool_call",
                        turn=run["turn"],
                        idx=idx,
                        call_id=call["id"],
                        name=call["function"]["name"],
                        arguments=parse_arguments(call),
                        key=f"{run['id']}:{run['turn']}:{call['id']}",
                    )
                step.checkpoint("tools_pending", tokens=tokens, turns=1, messages=[assistant])
            else:
                step.boundary = "reply.ready"
                step.checkpoint(
                    "reply_ready",
                    tokens=tokens,
                    turns=1,
                    messages=[assistant],
                    reply=content,
                    delivery_state="pending",
                    delivery_key=f"{run['id']}:reply",
                )

    # -- tools -------------------------------------------------------------------------------

    def execute_tools(self, lease: Lease, run: dict[str, Any]) -> None:
        turn = run["turn"] - 1
        for call in self.store.tool_calls(lease.run_id, turn):
            if call["state"] not in SETTLED:
                return self.execute_tool(lease, run, call)
        with self.store.step(lease, "model.ready") as step:
            messages = [
                {"role": "tool", "tool_call_id": c["call_id"], "content": json.dumps(c["outcome"])}
                for c in step.execute("tool_calls_of_turn", turn=turn)
            ]
            step.checkpoint("model_ready", messages=messages)

    def execute_tool(self, lease: Lease, run: dict[str, Any], call: dict[str, Any]) -> None:
        decl, mine = self.declarations.get(call["name"]), (lease.run_id, call["key"], lease.epoch)
        if decl is None or call["arguments"] is None:
            return self.settle(
                lease, call, "rejected", world.error("unknown tool or bad arguments")
            )
        if call["state"] == "started" and mine not in self.unsent:
            # Interrupted after it was marked started: it may have happened. Replayed only
            # while its tool's fingerprint (asked again now) is the one it was sent under.
            self.declarations = world.tools()
            decl = self.declarations.get(call["name"])
            if decl is None:
                return self.settle(lease, call, "outcome_unknown", world.unknown())
            replay = (
                decl["replay"] == "replayable" and decl.get("fingerprint") == call["fingerprint"]
            )
            if not replay:
                if not decl.get("queryable"):
                    return self.settle(lease, call, "outcome_unknown", world.unknown())
                self.store.hold(lease)
                applied, result = world.tool_effect(call["name"], call["key"])
                if applied:
                    return self.settle(lease, call, "succeeded", world.ok(result))
                # "Not applied" may be overtaken by a request of a worker that still lives (a
                # pause, a slow link): only a service that honours the key gets the call again.
                if applied is None or not decl.get("honours_idempotency_key"):
                    return self.settle(lease, call, "outcome_unknown", world.unknown())
        # Every attempt that may reach the tool is one tool call of the budget; a start this
        # process committed but never sent (its connection was lost) keeps its reservation.
        reserve = not (call["state"] == "started" and mine in self.unsent)
        if reserve and run["tool_calls_used"] >= run["tool_calls_limit"]:
            # CONTRACT s. 3 (budgets): the call is never sent and the run ends there.
            return self.finish(lease, "budget_exhausted", "tool_calls")
        with self.store.step(lease, "tool.started", **tool_detail(call)) as step:
            step.execute("start_tool_call", key=call["key"], fingerprint=decl.get("fingerprint"))
            if reserve:
                step.execute("use_tool_budget")
            self.unsent.add(mine)
        self.store.hold(lease)  # a worker woken after losing its lease stops before the effect
        self.unsent.discard(mine)
        with self.store.kept(lease):
            status, body = world.call_tool(call["name"], call["arguments"], call["key"])
            answers = {status}
            for wait in RETRY_WAITS_S:  # one logical call: the same key, no new budget
                if not retryable(decl, status) or (
                    status == 0 and not self.unchanged(call["name"], decl)
                ):
                    break
                time.sleep(wait)
                status, body = world.call_tool(call["name"], call["arguments"], call["key"])
                answers.add(status)
        if retryable(decl, status) and (status != 0 or self.unchanged(call["name"], decl)):
            # still not applied: never settled failed (CONTRACT s. 5)
            if answers <= {503, world.REFUSED}:
                self.unsent.add(mine)  # known not applied: sent again, no new budget
            raise RetryLater(f"tool answered {status}")
        world.report("tool.returned", lease.run_id, tool_detail(call))
        self.settle(lease, call, *self.outcome(lease, decl, call, status, body))

    def unchanged(self, name: str, decl: dict[str, Any]) -> bool:
        """The tool was not redeployed since the call was sent: a call sent before a change
        is never replayed after it (CONTRACT.md s. 3, Tools), so ask GET /tools again."""
        try:
            self.declarations = world.tools()
        except OSError:
            return False
        fresh = self.declarations.get(name)
        return fresh is not None and fresh.get("fingerprint") == decl.get("fingerprint")

    def outcome(self, lease: Lease, decl: dict, call: dict, status: int, body: Any) -> tuple:
        if status == 200 and isinstance(body, dict):
            return "succeeded", world.ok(body.get("result"))
        message = str((body if isinstance(body, dict) else {}).get("error", f"status {status}"))
        if status != 500 and status != 0:  # answered: not applied (503) or refused (4xx)
            return "failed", world.error(message)
        if decl.get("queryable"):  # the effect may have happened: ask by key
            self.store.hold(lease)
            applied, result = world.tool_effect(call["name"], call["key"])
            if applied is not None:
                return (
                    ("succeeded", world.ok(result)) if applied else ("failed", world.error(message))
                )
        if decl["replay"] == "replayable" and status != 0:
            return "failed", world.error(message)
        return "outcome_unknown", world.unknown()  # no answer: it may have happened

    def settle(self, lease: Lease, call: dict, state: str, outcome: dict) -> None:
        with self.store.step(lease, "tool.settled", **tool_detail(call)) as step:
            step.execute("settle_tool_call", key=call["key"], state=state, outcome=outcome)

    # -- the reply ---------------------------------------------------------------------------

    def deliver(self, lease: Lease, run: dict[str, Any]) -> None:
        key = run["delivery_key"]
        mine = (lease.run_id, key, lease.epoch)
        if run["delivery_state"] == "sending" and mine not in self.unsent:
            # A delivery attempt was interrupted: ask the sink, never resend blindly.
            self.store.hold(lease)
            delivered = world.reply_delivered(key)
            if delivered:
                return self.finish(lease, "succeeded", None, "delivered")
            if delivered is None:
                return self.finish(lease, "delivery_uncertain", "sink cannot be asked", "uncertain")
        with self.store.step(lease, "reply.sending") as step:
            step.execute("set_delivery", delivery_state="sending")
            self.unsent.add(mine)
        self.store.hold(lease)
        self.unsent.discard(mine)
        with self.store.kept(lease):
            status = world.post_reply(lease.run_id, run["reply"], key)
        if status == world.REFUSED:
            self.unsent.add(mine)  # it never left: posted again, no need to ask the sink
        if status != 200:
            raise RetryLater("the sink did not acknowledge")  # asked by key next time
        world.report("reply.sent", lease.run_id)
        self.finish(lease, "succeeded", None, "delivered")

    def finish(
        self, lease: Lease, status: str, reason: str | None, delivery_state: str | None = None
    ) -> None:
        with self.store.step(lease, "run.finished") as step:
            step.execute("finish", status=status, reason=reason, delivery_state=delivery_state)


def retryable(decl: dict[str, Any], status: int) -> bool:
    """Safe to send again with the same key: a 503 says not applied (CONTRACT s. 3), a
    refused connection never left (s. 5); a request that got no answer (a cut link) may be
    resent to a replayable tool."""
    return status in (503, world.REFUSED) or (status == 0 and decl["replay"] == "replayable")


def unavailable(status: int) -> bool:
    """The model provider did not serve the request (5xx, overloaded): nothing was billed."""
    return status >= 500 or status in (408, 429)


def tool_detail(call: dict[str, Any]) -> dict[str, str]:
    """What a tool boundary names: the model's call id and the idempotency key sent for it."""
    return {"tool_call_id": call["call_id"], "key": call["key"]}


def parse_answer(answer: Any) -> tuple[dict | None, dict | None]:
    try:
        message, usage = answer["choices"][0]["message"], answer["usage"]
    except (KeyError, IndexError, TypeError):
        return None, None
    return (
        (message, usage) if isinstance(message, dict) and isinstance(usage, dict) else (None, None)
    )


def parse_arguments(call: dict[str, Any]) -> dict[str, Any] | None:
    try:
        arguments = json.loads(call["function"].get("arguments") or "{}")
    except ValueError:
        return None
    return arguments if isinstance(arguments, dict) else None
