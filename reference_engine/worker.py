"""The worker loop: claim a run, then `load -> decide -> execute` until it is not ours.

All I/O lives here; what to do is decided by `decide.next_action` from durable state.
A lost database connection is never fatal: we back off, reconnect, re-read the run and
continue only if we still hold its lease (a commit whose ack was lost may or may not
have happened; the re-read tells). SIGTERM lets the current transition finish, then
releases the lease (the run is pending and available at once) and exits 0.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import logging
import signal
import threading
import types
import uuid
from typing import Any

import crashcert_probe
from reference_engine import checkpoint as checkpoint_module
from reference_engine import config as config_module
from reference_engine import (
    connection,
    decide,
    errors,
    leases,
    maintenance,
    model_client,
    reads,
    services,
    telemetry,
    transitions,
)
from reference_engine import heartbeat as heartbeat_module
from reference_engine import state as state_module

logger = logging.getLogger(__name__)

RECONCILE_BATCH = 20
MAX_REPLY_ATTEMPTS = 5


@dataclasses.dataclass
class Memo:
    """What this process learned under one lease and has not made durable yet."""

    model_answers: dict[str, tuple[model_client.ModelAnswer, dict[str, dict[str, Any]]]] = (
        dataclasses.field(default_factory=dict)
    )
    tool_results: dict[str, services.ToolResult] = dataclasses.field(default_factory=dict)
    tools_sent: set[str] = dataclasses.field(default_factory=set)
    reply_acked: bool = False

    def known(self, lease: leases.Lease) -> state_module.Known:
        return state_module.Known(
            worker_id=lease.worker_id,
            lease_epoch=lease.epoch,
            model_results=frozenset(self.model_answers),
            tool_results=frozenset(self.tool_results),
            tools_sent=frozenset(self.tools_sent),
            reply_acked=self.reply_acked,
        )


class Worker:
    def __init__(self, settings: config_module.Settings) -> None:
        self.settings = settings
        # An external call starts only while the lease has at least this much left.
        self._lease_margin_s = settings.lease_ms / 1000.0 / 5
        self.stopping = threading.Event()
        self.reporter = crashcert_probe.Reporter(settings.control, worker_id=settings.worker_id)
        self.db = connection.Connector(
            settings.database_url,
            application_name=f"worker {settings.worker_id}",
            # a worker stopped inside a transaction must not hold the run's row forever
            idle_in_transaction_ms=max(2 * settings.lease_ms, 1000),
        )
        self.heartbeat_db = heartbeat_module.connector(
            settings.database_url, worker_id=settings.worker_id, lease_ms=settings.lease_ms
        )
        self.runs = transitions.Transitions(self.db, reporter=self.reporter, redact=settings.redact)
        backoff = services.Backoff(
            settings.backoff_ms, settings.max_backoff_ms, settings.retry_limit
        )
        timeout_s = settings.http_timeout_ms / 1000.0
        self.services = services.Services(
            tools_url=settings.tools_url,
            tools_mcp_url=settings.tools_mcp_url,
            reply_url=settings.reply_url,
            timeout_s=timeout_s,
            backoff=backoff,
            stopping=self.stopping,
        )
        self.model = model_client.ModelClient(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.model,
            timeout_s=timeout_s,
            delays=backoff.delays(),
            stream=settings.stream,
        )
        self.telemetry = telemetry.from_env(
            worker_id=settings.worker_id, model=settings.model, redact=settings.redact
        )

    # -- main loop -----------------------------------------------------------------------

    def install_signals(self) -> None:
        def on_signal(signum: int, frame: types.FrameType | None) -> None:
            self.stopping.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def run(self, *, once: bool = False) -> int:
        delay = self._db_backoff()
        idle = False
        while not self.stopping.is_set():
            try:
                # Idle: one statement per poll until there is something a pass could take.
                if idle and not maintenance.work_waiting(self.db):
                    self.stopping.wait(self.settings.poll_ms / 1000.0)
                    continue
                maintenance.reconcile(
                    self.db,
                    redact=self.settings.redact,
                    limit=RECONCILE_BATCH,
                    backoff_ms=self.settings.backoff_ms,
                )
                lease = self.runs.claim(self.settings.worker_id, self.settings.lease_ms)
            except (errors.DatabaseUnavailable, errors.RetryableConflict) as error:
                logger.warning("database: %s", error)
                self.stopping.wait(next(delay))
                continue
            delay = self._db_backoff()
            idle = lease is None
            if lease is None:
                if once:
                    break
                self.stopping.wait(self.settings.poll_ms / 1000.0)
                continue
            self.process(lease)
        self.close()
        return 0

    def close(self) -> None:
        self.db.close()
        self.heartbeat_db.close()
        self.services.close()
        self.model.close()
        self.telemetry.close()

    def _db_backoff(self) -> collections.abc.Iterator[float]:
        first, cap = self.settings.backoff_ms / 1000.0, self.settings.max_backoff_ms / 1000.0
        current = first
        while True:
            yield current
            current = min(current * 2, cap)

    def process(self, lease: leases.Lease) -> None:
        heartbeat = heartbeat_module.Heartbeat(
            self.heartbeat_db, lease, lease_ms=self.settings.lease_ms
        ).start()
        memo = Memo()
        delay = self._db_backoff()
        try:
            while not heartbeat.lost.is_set():
                if self.stopping.is_set():
                    self._release_on_stop(lease)
                    return
                try:
                    run = reads.load(self.db, lease.run_id)
                    action = decide.next_action(run, memo.known(lease))
                    if isinstance(action, decide.Stop):
                        logger.info("run %s: stop (%s)", lease.run_id, action.why)
                        return
                    self.execute(lease, run, action, memo)
                    delay = self._db_backoff()
                except (errors.LeaseLost, errors.RunCancelled) as error:
                    logger.info("run %s: %s", lease.run_id, error)
                    return
                except errors.StaleState as error:
                    logger.info("run %s: re-reading: %s", lease.run_id, error)
                except (errors.DatabaseUnavailable, errors.RetryableConflict) as error:
                    # unknown commit outcome: back off, reconnect on next use, re-read
                    logger.warning("run %s: database: %s", lease.run_id, error)
                    self.stopping.wait(next(delay))
                except errors.CheckpointInvalid as error:
                    self._fail(lease, f"checkpoint invalid: {error}")
                except errors.ServiceUnavailable as error:
                    self._release(lease, delay_ms=self.settings.max_backoff_ms, why=str(error))
                    return
                except (errors.WorldError, errors.ModelRefused) as error:
                    self._fail(lease, str(error))
                except Exception as error:
                    # a bug must not crash-loop the fleet: give the run back with a delay;
                    # attempts are counted per claim, so a poisoned run ends dead-lettered
                    logger.exception("run %s: internal error", lease.run_id)
                    self.db.close()  # its transaction state is unknown
                    self._release(
                        lease,
                        delay_ms=self.settings.max_backoff_ms,
                        why=f"internal error: {type(error).__name__}: {error}"[:500],
                    )
                    return
        finally:
            heartbeat.stop()
            leases.unlock(self.db, lease)

    def _fail(self, lease: leases.Lease, reason: str) -> None:
        try:
            self.runs.finish(lease, status="failed", reason=reason)
        except errors.EngineError as error:
            logger.warning("run %s: could not record failure: %s", lease.run_id, error)

    def _release_on_stop(self, lease: leases.Lease) -> None:
        self._release(lease, delay_ms=0, why="worker stopping")

    def _release(self, lease: leases.Lease, *, delay_ms: int, why: str) -> None:
        try:
            self.runs.release(lease, delay_ms=delay_ms, why=why)
        except errors.EngineError as error:
            # the lease lapses by itself; reconciliation makes the run claimable again
            logger.info("run %s: release (%s) failed: %s", lease.run_id, why, error)

    # -- actions -------------------------------------------------------------------------

    def execute(
        self,
        lease: leases.Lease,
        run: state_module.RunState,
        action: decide.Action,
        memo: Memo,
    ) -> None:
        match action:
            case decide.Finish(status=status, reason=reason):
                self.runs.finish(lease, status=status, reason=reason)
            case decide.Cancel():
                # the fenced transaction sees the request and cancels instead of releasing
                self.runs.release(lease, delay_ms=0, why="cancel requested")
            case decide.OpenModelCall(turn=turn, attempt=attempt, interrupt=interrupt):
                self.runs.open_model_call(
                    lease,
                    expected_version=run.frontier_version,
                    point=decide.validated(run),
                    call_id=str(uuid.uuid4()),
                    turn=turn,
                    attempt=attempt,
                    interrupt=interrupt,
                )
            case decide.CallModel(call_id=call_id):
                self._call_model(lease, run, call_id, memo)
            case decide.RecordModel(call_id=call_id):
                answer, declarations = memo.model_answers[call_id]
                plan = decide.plan_record(run, call_id, answer.message, answer.usage, declarations)
                self.runs.record_model_call(
                    lease, expected_version=run.frontier_version, plan=plan, response=answer.raw
                )
            case decide.StartTool(command_id=command_id, charge=charge):
                call = _tool(run, command_id)
                self.runs.start_tool(
                    lease,
                    command_id=call.id,
                    key=call.key,
                    tool_call_id=call.tool_call_id,
                    charge=charge,
                )
                self._run_tool(lease, call, call.declaration or {}, memo)
            case decide.ExecuteTool(command_id=command_id):
                call = _tool(run, command_id)
                self._run_tool(lease, call, call.declaration or {}, memo)
            case decide.SettleTool(command_id=command_id):
                call = _tool(run, command_id)
                result = memo.tool_results[command_id]
                self.runs.settle_tool(
                    lease,
                    command_id=call.id,
                    tool_call_id=call.tool_call_id,
                    key=call.key,
                    state=result.state,
                    outcome=result.outcome,
                )
            case decide.RecoverTool(command_id=command_id):
                self._recover_tool(lease, _tool(run, command_id), memo)
            case decide.AwaitApproval(command_id=command_id):
                call = _tool(run, command_id)
                self.runs.await_approval(lease, command_id=call.id, tool_call_id=call.tool_call_id)
            case decide.CloseRound(checkpoint=point):
                self.runs.close_round(lease, expected_version=run.frontier_version, point=point)
            case decide.SendReply():
                self._send_reply(lease, run, memo)
            case decide.QueryReply():
                self._query_reply(lease, run, memo)
            case decide.FinishDelivered():
                assert run.delivery is not None
                self.runs.finish_delivered(lease, key=run.delivery.key)
            case _:
                raise AssertionError(f"unhandled action {action!r}")

    def _call_model(
        self, lease: leases.Lease, run: state_module.RunState, call_id: str, memo: Memo
    ) -> None:
        point = decide.validated(run)
        declarations = self.services.declarations()
        tools = [{"type": "function", "function": d["function"]} for d in declarations.values()]
        leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
        try:
            with self.telemetry.chat(lease.run_id, point.transcript, declarations.values()) as span:
                answer = self.model.complete(list(point.transcript), tools)
                span.answered(answer.message, answer.usage)
        except errors.ModelAnswerLost as error:
            logger.info("run %s: model answer lost, asking again: %s", lease.run_id, error)
            self.runs.lose_model_call(lease, call_id=call_id, error=str(error))
            # Each new call costs an iteration (the lost one may have been billed): asked
            # again at once, a link that resets every connection for a moment (model_cut)
            # would spend the whole budget in a few milliseconds. Wait out the outage.
            self.stopping.wait(self.settings.max_backoff_ms / 1000.0)
            return
        except errors.ModelUnavailable as error:
            status = self.runs.fail_model_call(
                lease, call_id=call_id, error=str(error), delay_ms=self.settings.max_backoff_ms
            )
            logger.warning("run %s: model unavailable, run now %s", lease.run_id, status)
            raise errors.LeaseLost("released after model failures") from None
        self.reporter.report("model.returned", lease.run_id, call_id=call_id, turn=point.turn)
        memo.model_answers[call_id] = (answer, declarations)

    def _run_tool(
        self,
        lease: leases.Lease,
        call: state_module.ToolCall,
        declaration: dict[str, Any],
        memo: Memo,
    ) -> None:
        # a zombie must not repeat its successor's effect
        leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
        memo.tools_sent.add(call.id)
        with self.telemetry.tool(
            lease.run_id, call.tool_call_id, call.name, call.arguments
        ) as span:
            result = self.services.run_tool(call.name, call.arguments, call.key, declaration)
            span.settled(result.state, result.outcome)
        self.reporter.report(
            "tool.returned",
            lease.run_id,
            tool_call_id=call.tool_call_id,
            key=call.key,
            state=result.state,
        )
        memo.tool_results[call.id] = result
        self.runs.settle_tool(
            lease,
            command_id=call.id,
            tool_call_id=call.tool_call_id,
            key=call.key,
            state=result.state,
            outcome=result.outcome,
        )

    def _recover_tool(self, lease: leases.Lease, call: state_module.ToolCall, memo: Memo) -> None:
        current = self.services.declarations().get(call.name)
        recovery = decide.recover_tool(call, current)
        if isinstance(recovery, decide.Query):
            found = self.services.query_effect(call.name, call.key)
            if found is not None and found.state == "succeeded":
                self.runs.settle_tool(
                    lease,
                    command_id=call.id,
                    tool_call_id=call.tool_call_id,
                    key=call.key,
                    state="succeeded",
                    outcome=found.outcome,
                )
                return
            if found is None:
                recovery = decide.Unknown(f"tool {call.name!r} could not be queried by key")
            else:
                recovery = decide.after_query_not_applied(call, current or {})
        if isinstance(recovery, decide.Unknown):
            self.runs.settle_tool(
                lease,
                command_id=call.id,
                tool_call_id=call.tool_call_id,
                key=call.key,
                state="outcome_unknown",
                outcome={"error": recovery.reason, "note": checkpoint_module.UNKNOWN_NOTE},
            )
            return
        # replayable with an unchanged contract, or not applied at a service that honours
        # idempotency keys: the same key again
        self.runs.start_tool(
            lease, command_id=call.id, key=call.key, tool_call_id=call.tool_call_id, charge=False
        )
        self._run_tool(lease, call, current or call.declaration or {}, memo)

    def _send_reply(self, lease: leases.Lease, run: state_module.RunState, memo: Memo) -> None:
        delivery = run.delivery
        assert delivery is not None
        if delivery.attempts >= MAX_REPLY_ATTEMPTS:
            # the sink keeps failing before taking it: try again later, from the top
            self.runs.release(
                lease,
                delay_ms=self.settings.max_backoff_ms,
                why=f"reply not accepted in {delivery.attempts} attempts",
            )
            raise errors.LeaseLost("released: reply sink keeps failing")
        content = decide.validated(run).reply or ""
        self.runs.mark_sending(lease, key=delivery.key)
        # paused at reply.sending past the lease, or a slow link: stop here
        leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
        outcome = self.services.send_reply(run.run_id, content, delivery.key)
        if outcome == "sent":
            self.reporter.report("reply.sent", lease.run_id, key=delivery.key)
            memo.reply_acked = True
            self.runs.finish_delivered(lease, key=delivery.key)
        # otherwise the next decision sees `sending` and asks the sink by key

    def _query_reply(self, lease: leases.Lease, run: state_module.RunState, memo: Memo) -> None:
        delivery = run.delivery
        assert delivery is not None
        status = self.services.query_reply(delivery.key)
        if status is None:
            self.runs.release(
                lease, delay_ms=self.settings.max_backoff_ms, why="reply sink unreachable"
            )
            raise errors.LeaseLost("released: reply sink unreachable")
        verdict = decide.reply_after_query(status)
        if verdict == "delivered":
            self.runs.finish_delivered(lease, key=delivery.key)
        elif verdict == "send":
            self._send_reply(lease, run, memo)
        else:
            self.runs.finish_uncertain(
                lease,
                key=delivery.key,
                reason=f"the reply may have been delivered and the sink cannot be asked "
                f"(GET /replies answered {status}); not resending blindly",
            )


def _tool(run: state_module.RunState, command_id: str) -> state_module.ToolCall:
    return next(call for call in run.tool_calls if call.id == command_id)
