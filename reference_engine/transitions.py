"""The durable state transitions a worker performs on a run it holds, each one fenced.

Every transition of a leased run is one transaction that first locks the run row
(`SELECT ... FOR UPDATE`) and checks lease owner, epoch and liveness, and right before
COMMIT (after the `:before_commit` report, which may be held by the harness) checks the
lease against `clock_timestamp()` again. A stale worker therefore commits nothing. A
pending cancellation turns the transition into the cancellation instead.

The harness kills workers at the boundary reports, so where a report sits relative to
COMMIT decides what a trial sees: `:before_commit` is the last thing before COMMIT, the
plain report the first thing after it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import time
from typing import Any

import crashcert_probe
from reference_engine import checkpoint as checkpoint_module
from reference_engine import connection, decide, errors, events, leases


@dataclasses.dataclass(frozen=True)
class Mark:
    """The boundary a transition reports around its COMMIT, with the report's detail."""

    boundary: str | None
    detail: dict[str, Any]
    cancelled: bool = False


Body = collections.abc.Callable[[events.Tx], Mark]


class Transitions:
    """The writes a worker makes under its lease; `reporter` hears each one's boundary."""

    def __init__(
        self,
        db: connection.Connector,
        *,
        reporter: crashcert_probe.Reporter | None = None,
        redact: bool = False,
    ) -> None:
        self.db = db
        self.reporter = reporter or crashcert_probe.disabled()
        self.redact = redact

    def claim(self, worker_id: str, lease_ms: int) -> leases.Lease | None:
        with events.transaction(self.db, redact=self.redact) as tx:
            row = tx.one("claim_run", worker_id=worker_id, lease_ms=lease_ms)
            if row is None:
                return None
            lease = leases.Lease(
                str(row["id"]),
                worker_id,
                int(row["lease_epoch"]),
                int(row["attempts"]),
                locked=bool(row["lease_locked"]),
            )
            tx.event(lease, "run.claimed", attempt=lease.attempts)
        if lease.locked:
            self.db.session_locks.add(lease.run_id)
        self.reporter.report("run.claimed", lease.run_id, lease_epoch=lease.epoch)
        return lease

    def _fenced(self, lease: leases.Lease, body: Body) -> Mark:
        """Run `body` as one fenced transaction and report its boundary around COMMIT."""
        with events.transaction(self.db, redact=self.redact) as tx:
            asked = time.monotonic()
            row = tx.one("lock_run", run_id=lease.run_id)
            if row is None:
                raise errors.NotFound(f"no run {lease.run_id}")
            if (
                row["status"] != "running"
                or row["lease_owner"] != lease.worker_id
                or row["lease_epoch"] != lease.epoch
                or not row["lease_live"]
            ):
                raise errors.LeaseLost(
                    f"run {lease.run_id}: lease of {lease.worker_id} epoch {lease.epoch} "
                    f"is gone (status {row['status']}, owner {row['lease_owner']}, "
                    f"epoch {row['lease_epoch']}, live {row['lease_live']})"
                )
            if row["cancel_requested"]:
                cancel(tx, lease)
                mark = Mark("run.finished", {"status": "cancelled"}, cancelled=True)
            else:
                mark = body(tx)
            tx.flush()  # the transaction's work is complete before the report
            # The row lock held since the start pins lease_expires_at; only time moves, so
            # the last check needs no round trip (counted from when lock_run left): nothing
            # but COMMIT follows the before_commit report, as the contract says.
            expires = asked + float(row["lease_left_ms"]) / 1000.0
            if mark.boundary is not None:
                self.reporter.report(
                    mark.boundary + crashcert_probe.BEFORE_COMMIT, lease.run_id, **mark.detail
                )
            if time.monotonic() >= expires:
                raise errors.LeaseLost(f"run {lease.run_id}: lease expired before commit")
        if mark.boundary is not None:
            self.reporter.report(mark.boundary, lease.run_id, **mark.detail)
        if mark.cancelled:
            raise errors.RunCancelled(f"run {lease.run_id} was cancelled")
        return mark

    # -- the model ----------------------------------------------------------------------

    def open_model_call(
        self,
        lease: leases.Lease,
        *,
        expected_version: int,
        point: checkpoint_module.Checkpoint,
        call_id: str,
        turn: int,
        attempt: int,
        interrupt: tuple[str, ...],
    ) -> None:
        def body(tx: events.Tx) -> Mark:
            for old in interrupt:
                if (
                    tx.one(
                        "interrupt_model_call",
                        call_id=old,
                        error="interrupted: opened under an earlier lease",
                    )
                    is not None
                ):
                    tx.event(lease, "model.call_interrupted", call_id=old)
            if (
                tx.one(
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="iterations",
                    amount=1,
                    ref=call_id,
                )
                is None
            ):
                raise errors.StaleState(f"iteration for model call {call_id} already billed")
            tx.all(
                "insert_model_call",
                call_id=call_id,
                run_id=lease.run_id,
                turn=turn,
                attempt=attempt,
                lease_epoch=lease.epoch,
            )
            tx.event(lease, "model.call_started", call_id=call_id, turn=turn, attempt=attempt)
            version = _advance(
                tx,
                lease,
                expected_version=expected_version,
                phase="model_pending",
                point=point.model_copy(update={"model_call_id": call_id, "decision": None}),
            )
            return Mark(
                "model.pending",
                {"frontier_version": version, "phase": "model_pending", "turn": turn},
            )

        self._fenced(lease, body)

    def record_model_call(
        self,
        lease: leases.Lease,
        *,
        expected_version: int,
        plan: decide.RecordPlan,
        response: dict[str, Any],
    ) -> None:
        def body(tx: events.Tx) -> Mark:
            if (
                tx.one(
                    "record_model_call",
                    call_id=plan.call_id,
                    response=response,
                    usage=plan.usage,
                    lease_epoch=lease.epoch,
                )
                is None
            ):
                raise errors.StaleState(f"model call {plan.call_id} is no longer pending")
            tokens = int(plan.usage.get("total_tokens", 0))
            if tokens > 0:
                tx.all(
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="tokens",
                    amount=tokens,
                    ref=plan.call_id,
                )
            tx.event(
                lease,
                "model.call_recorded",
                call_id=plan.call_id,
                usage=plan.usage,
                content=plan.reply,
                tool_calls=[tool.tool_call_id for tool in plan.tools],
            )
            if plan.exhausted is not None:
                _finish(tx, lease, "budget_exhausted", plan.exhausted)
                return Mark("run.finished", {"status": "budget_exhausted"})
            for tool in plan.tools:
                row = tx.one(
                    "insert_tool_call",
                    run_id=lease.run_id,
                    turn=plan.checkpoint.turn,
                    position=tool.position,
                    tool_call_id=tool.tool_call_id,
                    name=tool.name,
                    arguments=tool.arguments,
                    key=tool.key,
                    declaration=tool.declaration,
                    state=tool.state,
                    outcome=tool.outcome,
                )
                assert row is not None
                tx.event(
                    lease,
                    "tool.command_reserved",
                    command_id=row["id"],
                    tool_call_id=tool.tool_call_id,
                    name=tool.name,
                    key=tool.key,
                    arguments=tool.arguments,
                )
                if tool.state == "failed":
                    tx.event(lease, "tool.failed", command_id=row["id"], outcome=tool.outcome)
            if plan.reply is not None:
                tx.all(
                    "insert_delivery",
                    run_id=lease.run_id,
                    key=decide.reply_key(lease.run_id),
                    content=plan.reply,
                )
            version = _advance(
                tx,
                lease,
                expected_version=expected_version,
                phase=plan.phase,
                point=plan.checkpoint,
            )
            name = "tools.pending" if plan.phase == "tools_pending" else "reply.ready"
            return Mark(name, {"frontier_version": version, "phase": plan.phase})

        self._fenced(lease, body)

    def fail_model_call(
        self, lease: leases.Lease, *, call_id: str, error: str, delay_ms: int
    ) -> str:
        """The model keeps failing: close the call and retry later (or dead-letter)."""

        def body(tx: events.Tx) -> Mark:
            tx.all("fail_model_call", call_id=call_id, error=error[:2000])
            tx.event(lease, "model.call_failed", call_id=call_id, error=error[:2000])
            run = tx.one("load_run", run_id=lease.run_id)
            assert run is not None
            if run["attempts"] >= run["max_attempts"]:
                _finish(
                    tx,
                    lease,
                    "dead_lettered",
                    f"model failed on all {run['attempts']} attempts: {error[:500]}",
                )
                return Mark("run.finished", {"status": "dead_lettered"})
            tx.all("release_run", run_id=lease.run_id, delay_ms=delay_ms)
            tx.event(lease, "run.released", delay_ms=delay_ms, why="model failing")
            return Mark(None, {"status": "pending"})

        return str(self._fenced(lease, body).detail["status"])

    def lose_model_call(self, lease: leases.Lease, *, call_id: str, error: str) -> None:
        """The request may have been answered, the answer never arrived whole: close the
        call; the next step opens a new one (a new iteration) under the same lease."""

        def body(tx: events.Tx) -> Mark:
            tx.all("fail_model_call", call_id=call_id, error=error[:2000])
            tx.event(lease, "model.call_failed", call_id=call_id, error=error[:2000])
            return Mark(None, {})

        self._fenced(lease, body)

    # -- tools --------------------------------------------------------------------------

    def start_tool(
        self, lease: leases.Lease, *, command_id: str, key: str, tool_call_id: str, charge: bool
    ) -> None:
        def body(tx: events.Tx) -> Mark:
            if charge:
                tx.all(
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="tool_calls",
                    amount=1,
                    ref=command_id,
                )
            if (
                tx.one(
                    "start_tool_call",
                    command_id=command_id,
                    run_id=lease.run_id,
                    lease_epoch=lease.epoch,
                )
                is None
            ):
                raise errors.StaleState(f"tool call {command_id} cannot be started")
            tx.event(
                lease, "tool.started", command_id=command_id, key=key, tool_call_id=tool_call_id
            )
            return Mark(
                "tool.started", {"tool_call_id": tool_call_id, "key": key, "phase": "tools_pending"}
            )

        self._fenced(lease, body)

    def await_approval(self, lease: leases.Lease, *, command_id: str, tool_call_id: str) -> None:
        def body(tx: events.Tx) -> Mark:
            if tx.one("await_approval", command_id=command_id, run_id=lease.run_id) is not None:
                tx.event(
                    lease,
                    "tool.awaiting_approval",
                    command_id=command_id,
                    tool_call_id=tool_call_id,
                )
            tx.all("park_run", run_id=lease.run_id)
            tx.event(lease, "run.released", why="awaiting approval")
            return Mark(None, {})

        self._fenced(lease, body)

    def settle_tool(
        self,
        lease: leases.Lease,
        *,
        command_id: str,
        tool_call_id: str,
        key: str,
        state: str,
        outcome: dict[str, Any],
    ) -> None:
        def body(tx: events.Tx) -> Mark:
            if (
                tx.one(
                    "settle_tool_call",
                    command_id=command_id,
                    run_id=lease.run_id,
                    lease_epoch=lease.epoch,
                    state=state,
                    outcome=outcome,
                )
                is None
            ):
                raise errors.StaleState(f"tool call {command_id} is not started under my lease")
            kind = {"succeeded": "tool.succeeded", "outcome_unknown": "tool.outcome_unknown"}.get(
                state, "tool.failed"
            )
            tx.event(
                lease,
                kind,
                command_id=command_id,
                key=key,
                tool_call_id=tool_call_id,
                state=state,
                outcome=outcome,
            )
            return Mark("tool.settled", {"tool_call_id": tool_call_id, "key": key, "state": state})

        self._fenced(lease, body)

    def close_round(
        self, lease: leases.Lease, *, expected_version: int, point: checkpoint_module.Checkpoint
    ) -> None:
        def body(tx: events.Tx) -> Mark:
            version = _advance(
                tx, lease, expected_version=expected_version, phase="model_ready", point=point
            )
            return Mark("model.ready", {"frontier_version": version, "phase": "model_ready"})

        self._fenced(lease, body)

    # -- the reply and the end of a run -------------------------------------------------

    def mark_sending(self, lease: leases.Lease, *, key: str) -> None:
        def body(tx: events.Tx) -> Mark:
            row = tx.one("mark_delivery_sending", run_id=lease.run_id)
            if row is None:
                raise errors.StaleState(f"delivery of run {lease.run_id} is not sendable")
            tx.event(lease, "reply.sending", key=key, attempt=row["attempts"])
            return Mark("reply.sending", {"key": key, "phase": "reply_ready"})

        self._fenced(lease, body)

    def finish_delivered(self, lease: leases.Lease, *, key: str) -> None:
        def body(tx: events.Tx) -> Mark:
            if tx.one("mark_delivery_delivered", run_id=lease.run_id) is None:
                raise errors.StaleState(f"delivery of run {lease.run_id} is not sending")
            tx.event(lease, "reply.delivered", key=key)
            _finish(tx, lease, "succeeded", None)
            return Mark("run.finished", {"status": "succeeded", "key": key})

        self._fenced(lease, body)

    def finish_uncertain(self, lease: leases.Lease, *, key: str, reason: str) -> None:
        def body(tx: events.Tx) -> Mark:
            tx.all("mark_delivery_uncertain", run_id=lease.run_id)
            tx.event(lease, "reply.uncertain", key=key, reason=reason)
            _finish(tx, lease, "delivery_uncertain", reason)
            return Mark("run.finished", {"status": "delivery_uncertain", "key": key})

        self._fenced(lease, body)

    def finish(self, lease: leases.Lease, *, status: str, reason: str) -> None:
        def body(tx: events.Tx) -> Mark:
            _finish(tx, lease, status, reason)
            return Mark("run.finished", {"status": status})

        self._fenced(lease, body)

    def release(self, lease: leases.Lease, *, delay_ms: int, why: str) -> None:
        def body(tx: events.Tx) -> Mark:
            tx.all("release_run", run_id=lease.run_id, delay_ms=delay_ms)
            tx.event(lease, "run.released", delay_ms=delay_ms, why=why)
            return Mark(None, {})

        self._fenced(lease, body)


def cancel(tx: events.Tx, about: events.About) -> None:
    """End the run cancelled, with its open calls: by its lease holder, or by a command or
    reconciliation when nobody holds it (a bare run id)."""
    run_id = events.run_of(about)
    for row in tx.all("cancel_open_tool_calls", run_id=run_id):
        tx.event(about, "tool.cancelled", command_id=row["id"])
    tx.all("interrupt_open_model_calls", run_id=run_id, error="run cancelled")
    tx.all("finish_run", run_id=run_id, status="cancelled", reason="cancelled on request")
    tx.event(about, "run.cancelled")


def _finish(tx: events.Tx, lease: leases.Lease, status: str, reason: str | None) -> None:
    tx.all("interrupt_open_model_calls", run_id=lease.run_id, error=f"run ended {status}")
    if tx.one("finish_run", run_id=lease.run_id, status=status, reason=reason) is None:
        raise errors.StaleState(f"run {lease.run_id} is already terminal")
    tx.event(lease, f"run.{status}", reason=reason)


def _advance(
    tx: events.Tx,
    lease: leases.Lease,
    *,
    expected_version: int,
    phase: str,
    point: checkpoint_module.Checkpoint,
) -> int:
    row = tx.one(
        "advance_frontier",
        run_id=lease.run_id,
        expected_version=expected_version,
        phase=phase,
        checkpoint=checkpoint_module.dump(point),
        checkpoint_version=checkpoint_module.written_format(),
    )
    if row is None:
        raise errors.StaleState(
            f"run {lease.run_id}: frontier moved past version {expected_version}"
        )
    version = int(row["version"])
    tx.event(lease, "checkpoint.saved", phase=phase, version=version)
    return version
