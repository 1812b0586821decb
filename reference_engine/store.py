"""The only module that touches psycopg: connections, migrations, and every transition.

Connection loss and unknown commits
-----------------------------------
Errors are classified by SQLSTATE class, never by message text:

* no SQLSTATE (the client lost the socket), class 08 (connection exception), 57 (operator
  intervention: admin/crash shutdown, cannot connect now, query cancelled), 53
  (insufficient resources) and 25P03 (idle-in-transaction timeout) mean *the database is
  unavailable*: the connection is discarded and `errors.DatabaseUnavailable` is raised.
  If that happened while COMMIT was in flight, the commit's outcome is unknown. Callers
  must never assume it committed or not: they reconnect with backoff and re-read durable
  state, and carry on only if they still hold the lease (`decide` works from that state).
* class 40 (serialization failure 40001, deadlock 40P01) raises `errors.RetryableConflict`;
  the transaction rolled back and can be retried.
* anything else is a bug or a constraint doing its job and propagates.

Fencing
-------
Every transition of a leased run is one transaction that first locks the run row
(`SELECT ... FOR UPDATE`) and checks lease owner, epoch and liveness, and right before
COMMIT (after the `:before_commit` report, which may be held by the harness) checks the
lease against `clock_timestamp()` again. A stale worker therefore commits nothing. A
pending cancellation turns the transition into the cancellation instead.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import datetime
import decimal
import time
import uuid
from typing import Any

import psycopg
import psycopg.errors
import psycopg.rows
import psycopg.types.json

from reference_engine import boundary as boundary_module
from reference_engine import checkpoint as checkpoint_module
from reference_engine import decide, errors, sqlfile
from reference_engine import inputs as inputs_module
from reference_engine import redact as redact_module
from reference_engine import state as state_module

Row = dict[str, Any]
_UNAVAILABLE_CLASSES = frozenset({"08", "57", "53"})
_UNAVAILABLE_STATES = frozenset({"25P03"})
_MIGRATION_LOCK = 0x63726173  # "cras": serialises concurrent `migrate` commands


@dataclasses.dataclass(frozen=True)
class Lease:
    run_id: str
    worker_id: str
    epoch: int
    attempts: int = 0


@dataclasses.dataclass(frozen=True)
class Mark:
    """The boundary a transition reports around its COMMIT, with the report's detail."""

    boundary: str | None
    detail: dict[str, Any]
    cancelled: bool = False


def classify(error: psycopg.Error) -> errors.EngineError | None:
    """Map a psycopg error to the engine's error, or None when it must propagate."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is None:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return errors.DatabaseUnavailable(f"database unavailable: {error}")
        return None
    if sqlstate[:2] == "40":
        return errors.RetryableConflict(f"transaction conflict ({sqlstate}): {error}")
    if sqlstate[:2] in _UNAVAILABLE_CLASSES or sqlstate in _UNAVAILABLE_STATES:
        return errors.DatabaseUnavailable(f"database unavailable ({sqlstate}): {error}")
    return None


def _jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


def _adapt(params: collections.abc.Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: psycopg.types.json.Jsonb(value) if isinstance(value, dict | list) else value
        for key, value in params.items()
    }


class Store:
    def __init__(
        self,
        dsn: str,
        *,
        reporter: boundary_module.Reporter | None = None,
        redact: bool = False,
        application_name: str = "reference_engine",
        idle_in_transaction_ms: int = 0,
    ) -> None:
        self.dsn = dsn
        self.reporter = reporter or boundary_module.disabled()
        self.redact = redact
        self.application_name = application_name
        self.idle_in_transaction_ms = idle_in_transaction_ms
        self._conn: psycopg.Connection[Row] | None = None
        self._events: list[dict[str, Any]] = []

    # -- connection ----------------------------------------------------------------------

    def connect(self) -> psycopg.Connection[Row]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        options = f"-c idle_in_transaction_session_timeout={self.idle_in_transaction_ms}"
        with self._classified():
            self._conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                row_factory=psycopg.rows.dict_row,
                application_name=self.application_name,
                connect_timeout=5,
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
                tcp_user_timeout=10_000,
                options=options,
            )
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    @contextlib.contextmanager
    def _classified(self) -> collections.abc.Iterator[None]:
        try:
            yield
        except psycopg.Error as error:
            mapped = classify(error)
            if mapped is None:
                raise
            if isinstance(mapped, errors.DatabaseUnavailable):
                self.close()  # its state is unknown; never reuse it
            raise mapped from error

    def _all(self, conn: psycopg.Connection[Row], query: str, /, **params: Any) -> list[Row]:
        cursor = conn.execute(sqlfile.query(query), _adapt(params))
        return cursor.fetchall() if cursor.description else []

    def _one(self, conn: psycopg.Connection[Row], query: str, /, **params: Any) -> Row | None:
        rows = self._all(conn, query, **params)
        return rows[0] if rows else None

    def _event(
        self,
        conn: psycopg.Connection[Row],
        run_id: str | None,
        kind: str,
        *,
        worker_id: str | None = None,
        lease_epoch: int | None = None,
        **data: Any,
    ) -> None:
        payload = _jsonable(data)
        if self.redact:
            payload = redact_module.redact(payload)
        # buffered and written in one pipelined batch just before COMMIT (see _tx)
        self._events.append(
            {
                "run_id": run_id,
                "kind": kind,
                "worker_id": worker_id,
                "lease_epoch": lease_epoch,
                "data": payload,
            }
        )

    def _flush_events(self, conn: psycopg.Connection[Row]) -> None:
        if self._events:
            self._all(conn, "insert_events", events=list(self._events))
            self._events.clear()

    @contextlib.contextmanager
    def _tx(self) -> collections.abc.Iterator[psycopg.Connection[Row]]:
        """One transaction whose buffered events are written before it commits; events of
        a transaction that rolled back are dropped with it."""
        conn = self.connect()
        self._events.clear()
        try:
            with self._classified(), conn.transaction():
                yield conn
                self._flush_events(conn)
        finally:
            self._events.clear()

    def ensure_live(self, lease: Lease, *, margin_s: float = 0.1) -> None:
        """Called right before an external side effect (tool request, reply, model call).

        A worker paused past its lease wakes up here and stops, instead of repeating an
        effect its successor already resolved. The server's "still yours" can arrive late
        over a slow link, so the lease must still run `margin_s` after the answer came back,
        counted from when the question left. A pause between this check and the request is
        the one window no lease can fence: that request is truly in flight.
        """
        asked = time.monotonic()
        conn = self.connect()
        with self._classified():
            row = self._one(
                conn,
                "lease_still_live",
                run_id=lease.run_id,
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
            )
        if row is None or not row["live"]:
            raise errors.LeaseLost(f"lease on run {lease.run_id} lapsed before an external call")
        expires = asked + float(row["remaining_ms"]) / 1000.0
        if time.monotonic() + margin_s > expires:
            raise errors.LeaseLost(
                f"lease on run {lease.run_id} may lapse before an external call "
                f"(the check took {time.monotonic() - asked:.3f}s)"
            )

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        applied: list[str] = []
        with self._tx() as conn:
            self._all(conn, "lock_migrations", lock=_MIGRATION_LOCK)
            self._all(conn, "create_migrations_table")
            done = {row["number"] for row in self._all(conn, "applied_migrations")}
            for migration in sqlfile.migrations():
                if migration.number in done:
                    continue
                conn.execute(migration.sql.encode())
                self._all(conn, "record_migration", number=migration.number, name=migration.name)
                applied.append(f"{migration.number:03d}_{migration.name}")
        return applied

    # -- submit and commands -------------------------------------------------------------

    def create_run(self, run_input: inputs_module.RunInput) -> tuple[str, bool]:
        """Store a new run (idempotent on run_key): (run_id, created)."""
        point = checkpoint_module.dump(checkpoint_module.initial(run_input.messages))
        with self._tx() as conn:
            row = self._one(
                conn,
                "create_run",
                run_key=run_input.run_key,
                input=run_input.model_dump(mode="json"),
                iterations=run_input.budgets.iterations,
                tool_calls=run_input.budgets.tool_calls,
                tokens=run_input.budgets.tokens,
                max_attempts=run_input.max_attempts,
            )
            if row is None:
                existing = self._one(conn, "run_id_by_key", run_key=run_input.run_key)
                assert existing is not None
                return str(existing["id"]), False
            run_id = str(row["id"])
            self._all(
                conn,
                "insert_frontier",
                run_id=run_id,
                phase="model_ready",
                checkpoint=point,
                checkpoint_version=checkpoint_module.CHECKPOINT_VERSION,
            )
            self._event(conn, run_id, "run.created", run_key=run_input.run_key)
            self._event(conn, run_id, "checkpoint.saved", phase="model_ready", version=1)
        return run_id, True

    def request_cancel(self, run_id: str) -> str:
        """Cancel now when nobody holds the run; else flag it for the lease holder."""
        with self._tx() as conn:
            row = self._one(conn, "lock_run_plain", run_id=run_id)
            if row is None:
                raise errors.NotFound(f"no run {run_id}")
            status = row["status"]
            if status in state_module.TERMINAL:
                return str(status)
            self._all(conn, "request_cancel", run_id=run_id)
            self._event(conn, run_id, "run.cancel_requested", previous=status)
            if status in ("pending", "waiting"):
                self._cancel(conn, run_id, worker_id=None, epoch=None)
                return "cancelled"
            return "cancel_requested"

    def decide_approval(self, command_id: str, *, approve: bool) -> str:
        with self._tx() as conn:
            found = self._one(conn, "find_tool_call", command_id=command_id)
            if found is None:
                raise errors.NotFound(f"no tool call (command) {command_id}")
            run_id = str(found["run_id"])
            run = self._one(conn, "lock_run_plain", run_id=run_id)  # run first: lock order
            assert run is not None
            if run["status"] in state_module.TERMINAL:
                raise errors.Conflict(f"run {run_id} is already {run['status']}")
            if approve:
                done = self._one(conn, "approve_tool_call", command_id=command_id)
            else:
                done = self._one(
                    conn,
                    "reject_tool_call",
                    command_id=command_id,
                    outcome={"error": "rejected by an operator; not executed"},
                )
            if done is None:
                call = self._one(conn, "lock_tool_call", command_id=command_id)
                raise errors.Conflict(
                    f"tool call {command_id} is not awaiting approval "
                    f"(state {call and call['state']}, approval {call and call['approval']})"
                )
            self._event(
                conn, run_id, "tool.approved" if approve else "tool.rejected", command_id=command_id
            )
            self._all(conn, "wake_run", run_id=run_id)
        return "approved" if approve else "rejected"

    # -- claiming and leases -------------------------------------------------------------

    def claim(self, worker_id: str, lease_ms: int) -> Lease | None:
        with self._tx() as conn:
            row = self._one(conn, "claim_run", worker_id=worker_id, lease_ms=lease_ms)
            if row is None:
                return None
            lease = Lease(str(row["id"]), worker_id, int(row["lease_epoch"]), int(row["attempts"]))
            self._event(
                conn,
                lease.run_id,
                "run.claimed",
                worker_id=worker_id,
                lease_epoch=lease.epoch,
                attempt=lease.attempts,
            )
        self.reporter.report("run.claimed", lease.run_id, lease_epoch=lease.epoch)
        return lease

    def extend_lease(self, lease: Lease, lease_ms: int) -> bool:
        conn = self.connect()
        with self._classified():
            row = self._one(
                conn,
                "extend_lease",
                run_id=lease.run_id,
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                lease_ms=lease_ms,
            )
        return row is not None

    # -- loading -------------------------------------------------------------------------

    def load(self, run_id: str) -> state_module.RunState:
        conn = self.connect()
        with self._classified():
            # one statement = one snapshot: the frontier and its audit rows agree
            row = self._one(conn, "load_state", run_id=run_id)
        if row is None or row["run"] is None:
            raise errors.NotFound(f"no run {run_id}")
        run = row["run"]
        frontier = row["frontier"]
        model_calls = row["model_calls"]
        tool_calls = row["tool_calls"]
        used = {kind: int(amount) for kind, amount in row["budget_used"].items()}
        charged = [{"kind": kind, "ref": ref} for kind, ref in row["charged"]]
        delivery = row["delivery"]
        budget = state_module.Budget(
            iterations=run["budget_iterations"],
            tool_calls=run["budget_tool_calls"],
            tokens=int(run["budget_tokens"]),
            iterations_used=used.get("iterations", 0),
            tool_calls_used=used.get("tool_calls", 0),
            tokens_used=used.get("tokens", 0),
            charged=frozenset((row["kind"], row["ref"]) for row in charged),
        )
        return state_module.RunState(
            run_id=str(run["id"]),
            status=run["status"],
            reason=run["reason"],
            lease_owner=run["lease_owner"],
            lease_epoch=int(run["lease_epoch"]),
            cancel_requested=bool(run["cancel_requested"]),
            attempts=run["attempts"],
            max_attempts=run["max_attempts"],
            frontier_version=frontier["version"] if frontier else 0,
            phase=frontier["phase"] if frontier else "missing",
            checkpoint=frontier["checkpoint"] if frontier else None,
            checkpoint_version=frontier["checkpoint_version"] if frontier else 0,
            budget=budget,
            model_calls=tuple(
                state_module.ModelCall(
                    id=str(row["id"]),
                    turn=row["turn"],
                    attempt=row["attempt"],
                    lease_epoch=int(row["lease_epoch"]),
                    state=row["state"],
                    usage=row["usage"],
                )
                for row in model_calls
            ),
            tool_calls=tuple(
                state_module.ToolCall(
                    id=str(row["id"]),
                    turn=row["turn"],
                    position=row["position"],
                    tool_call_id=row["tool_call_id"],
                    name=row["name"],
                    arguments=row["arguments"],
                    key=row["idempotency_key"],
                    declaration=row["declaration"],
                    state=row["state"],
                    approval=row["approval"],
                    outcome=row["outcome"],
                    started_epoch=row["started_epoch"],
                    attempts=row["attempts"],
                )
                for row in tool_calls
            ),
            delivery=state_module.Delivery(delivery["key"], delivery["state"], delivery["attempts"])
            if delivery
            else None,
        )

    # -- fenced transitions --------------------------------------------------------------

    def _transition(
        self,
        lease: Lease,
        body: collections.abc.Callable[[psycopg.Connection[Row]], Mark],
    ) -> Mark:
        """Run `body` as one fenced transaction and report its boundary around COMMIT."""
        with self._tx() as conn:
            asked = time.monotonic()
            row = self._one(conn, "lock_run", run_id=lease.run_id)
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
                self._cancel(conn, lease.run_id, worker_id=lease.worker_id, epoch=lease.epoch)
                mark = Mark("run.finished", {"status": "cancelled"}, cancelled=True)
            else:
                mark = body(conn)
            self._flush_events(conn)  # the transaction's work is complete before the report
            # The row lock held since the start pins lease_expires_at; only time moves, so
            # the last check needs no round trip (counted from when lock_run left): nothing
            # but COMMIT follows the before_commit report, as the contract says.
            expires = asked + float(row["lease_left_ms"]) / 1000.0
            if mark.boundary is not None:
                self.reporter.report(
                    mark.boundary + boundary_module.BEFORE_COMMIT, lease.run_id, **mark.detail
                )
            if time.monotonic() >= expires:
                raise errors.LeaseLost(f"run {lease.run_id}: lease expired before commit")
        if mark.boundary is not None:
            self.reporter.report(mark.boundary, lease.run_id, **mark.detail)
        if mark.cancelled:
            raise errors.RunCancelled(f"run {lease.run_id} was cancelled")
        return mark

    def _cancel(
        self,
        conn: psycopg.Connection[Row],
        run_id: str,
        *,
        worker_id: str | None,
        epoch: int | None,
    ) -> None:
        for row in self._all(conn, "cancel_open_tool_calls", run_id=run_id):
            self._event(
                conn,
                run_id,
                "tool.cancelled",
                worker_id=worker_id,
                lease_epoch=epoch,
                command_id=row["id"],
            )
        self._all(conn, "interrupt_open_model_calls", run_id=run_id, error="run cancelled")
        self._all(
            conn, "finish_run", run_id=run_id, status="cancelled", reason="cancelled on request"
        )
        self._event(conn, run_id, "run.cancelled", worker_id=worker_id, lease_epoch=epoch)

    def _advance(
        self,
        conn: psycopg.Connection[Row],
        lease: Lease,
        *,
        expected_version: int,
        phase: str,
        point: checkpoint_module.Checkpoint,
    ) -> int:
        row = self._one(
            conn,
            "advance_frontier",
            run_id=lease.run_id,
            expected_version=expected_version,
            phase=phase,
            checkpoint=checkpoint_module.dump(point),
            checkpoint_version=checkpoint_module.CHECKPOINT_VERSION,
        )
        if row is None:
            raise errors.StaleState(
                f"run {lease.run_id}: frontier moved past version {expected_version}"
            )
        version = int(row["version"])
        self._event(
            conn,
            lease.run_id,
            "checkpoint.saved",
            worker_id=lease.worker_id,
            lease_epoch=lease.epoch,
            phase=phase,
            version=version,
        )
        return version

    def open_model_call(
        self,
        lease: Lease,
        *,
        expected_version: int,
        point: checkpoint_module.Checkpoint,
        call_id: str,
        turn: int,
        attempt: int,
        interrupt: tuple[str, ...],
    ) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            for old in interrupt:
                if (
                    self._one(
                        conn,
                        "interrupt_model_call",
                        call_id=old,
                        error="interrupted: opened under an earlier lease",
                    )
                    is not None
                ):
                    self._event(
                        conn,
                        lease.run_id,
                        "model.call_interrupted",
                        worker_id=lease.worker_id,
                        lease_epoch=lease.epoch,
                        call_id=old,
                    )
            if (
                self._one(
                    conn,
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="iterations",
                    amount=1,
                    ref=call_id,
                )
                is None
            ):
                raise errors.StaleState(f"iteration for model call {call_id} already billed")
            self._all(
                conn,
                "insert_model_call",
                call_id=call_id,
                run_id=lease.run_id,
                turn=turn,
                attempt=attempt,
                lease_epoch=lease.epoch,
            )
            self._event(
                conn,
                lease.run_id,
                "model.call_started",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                call_id=call_id,
                turn=turn,
                attempt=attempt,
            )
            version = self._advance(
                conn,
                lease,
                expected_version=expected_version,
                phase="model_pending",
                point=point.model_copy(update={"model_call_id": call_id, "decision": None}),
            )
            return Mark(
                "model.pending",
                {"frontier_version": version, "phase": "model_pending", "turn": turn},
            )

        self._transition(lease, body)

    def record_model_call(
        self,
        lease: Lease,
        *,
        expected_version: int,
        plan: decide.RecordPlan,
        response: dict[str, Any],
    ) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            if (
                self._one(
                    conn,
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
                self._all(
                    conn,
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="tokens",
                    amount=tokens,
                    ref=plan.call_id,
                )
            self._event(
                conn,
                lease.run_id,
                "model.call_recorded",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                call_id=plan.call_id,
                usage=plan.usage,
                content=plan.reply,
                tool_calls=[tool.tool_call_id for tool in plan.tools],
            )
            if plan.exhausted is not None:
                self._finish(conn, lease, "budget_exhausted", plan.exhausted)
                return Mark("run.finished", {"status": "budget_exhausted"})
            for tool in plan.tools:
                row = self._one(
                    conn,
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
                self._event(
                    conn,
                    lease.run_id,
                    "tool.command_reserved",
                    worker_id=lease.worker_id,
                    lease_epoch=lease.epoch,
                    command_id=row["id"],
                    tool_call_id=tool.tool_call_id,
                    name=tool.name,
                    key=tool.key,
                    arguments=tool.arguments,
                )
                if tool.state == "failed":
                    self._event(
                        conn,
                        lease.run_id,
                        "tool.failed",
                        worker_id=lease.worker_id,
                        lease_epoch=lease.epoch,
                        command_id=row["id"],
                        outcome=tool.outcome,
                    )
            if plan.reply is not None:
                self._all(
                    conn,
                    "insert_delivery",
                    run_id=lease.run_id,
                    key=decide.reply_key(lease.run_id),
                    content=plan.reply,
                )
            version = self._advance(
                conn,
                lease,
                expected_version=expected_version,
                phase=plan.phase,
                point=plan.checkpoint,
            )
            name = "tools.pending" if plan.phase == "tools_pending" else "reply.ready"
            return Mark(name, {"frontier_version": version, "phase": plan.phase})

        self._transition(lease, body)

    def fail_model_call(self, lease: Lease, *, call_id: str, error: str, delay_ms: int) -> str:
        """The model keeps failing: close the call and retry later (or dead-letter)."""

        def body(conn: psycopg.Connection[Row]) -> Mark:
            self._all(conn, "fail_model_call", call_id=call_id, error=error[:2000])
            self._event(
                conn,
                lease.run_id,
                "model.call_failed",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                call_id=call_id,
                error=error[:2000],
            )
            run = self._one(conn, "load_run", run_id=lease.run_id)
            assert run is not None
            if run["attempts"] >= run["max_attempts"]:
                self._finish(
                    conn,
                    lease,
                    "dead_lettered",
                    f"model failed on all {run['attempts']} attempts: {error[:500]}",
                )
                return Mark("run.finished", {"status": "dead_lettered"})
            self._all(conn, "release_run", run_id=lease.run_id, delay_ms=delay_ms)
            self._event(
                conn,
                lease.run_id,
                "run.released",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                delay_ms=delay_ms,
                why="model failing",
            )
            return Mark(None, {"status": "pending"})

        return str(self._transition(lease, body).detail["status"])

    def start_tool(
        self, lease: Lease, *, command_id: str, key: str, tool_call_id: str, charge: bool
    ) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            if charge:
                self._all(
                    conn,
                    "charge_budget",
                    run_id=lease.run_id,
                    kind="tool_calls",
                    amount=1,
                    ref=command_id,
                )
            if (
                self._one(
                    conn,
                    "start_tool_call",
                    command_id=command_id,
                    run_id=lease.run_id,
                    lease_epoch=lease.epoch,
                )
                is None
            ):
                raise errors.StaleState(f"tool call {command_id} cannot be started")
            self._event(
                conn,
                lease.run_id,
                "tool.started",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                command_id=command_id,
                key=key,
                tool_call_id=tool_call_id,
            )
            return Mark(
                "tool.started", {"tool_call_id": tool_call_id, "key": key, "phase": "tools_pending"}
            )

        self._transition(lease, body)

    def await_approval(self, lease: Lease, *, command_id: str, tool_call_id: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            if (
                self._one(conn, "await_approval", command_id=command_id, run_id=lease.run_id)
                is not None
            ):
                self._event(
                    conn,
                    lease.run_id,
                    "tool.awaiting_approval",
                    worker_id=lease.worker_id,
                    lease_epoch=lease.epoch,
                    command_id=command_id,
                    tool_call_id=tool_call_id,
                )
            self._all(conn, "park_run", run_id=lease.run_id)
            self._event(
                conn,
                lease.run_id,
                "run.released",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                why="awaiting approval",
            )
            return Mark(None, {})

        self._transition(lease, body)

    def settle_tool(
        self,
        lease: Lease,
        *,
        command_id: str,
        tool_call_id: str,
        key: str,
        state: str,
        outcome: dict[str, Any],
    ) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            if (
                self._one(
                    conn,
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
            self._event(
                conn,
                lease.run_id,
                kind,
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                command_id=command_id,
                key=key,
                tool_call_id=tool_call_id,
                state=state,
                outcome=outcome,
            )
            return Mark("tool.settled", {"tool_call_id": tool_call_id, "key": key, "state": state})

        self._transition(lease, body)

    def close_round(
        self, lease: Lease, *, expected_version: int, point: checkpoint_module.Checkpoint
    ) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            version = self._advance(
                conn, lease, expected_version=expected_version, phase="model_ready", point=point
            )
            return Mark("model.ready", {"frontier_version": version, "phase": "model_ready"})

        self._transition(lease, body)

    def mark_sending(self, lease: Lease, *, key: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            row = self._one(conn, "mark_delivery_sending", run_id=lease.run_id)
            if row is None:
                raise errors.StaleState(f"delivery of run {lease.run_id} is not sendable")
            self._event(
                conn,
                lease.run_id,
                "reply.sending",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                key=key,
                attempt=row["attempts"],
            )
            return Mark("reply.sending", {"key": key, "phase": "reply_ready"})

        self._transition(lease, body)

    def finish_delivered(self, lease: Lease, *, key: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            if self._one(conn, "mark_delivery_delivered", run_id=lease.run_id) is None:
                raise errors.StaleState(f"delivery of run {lease.run_id} is not sending")
            self._event(
                conn,
                lease.run_id,
                "reply.delivered",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                key=key,
            )
            self._finish(conn, lease, "succeeded", None)
            return Mark("run.finished", {"status": "succeeded", "key": key})

        self._transition(lease, body)

    def finish_uncertain(self, lease: Lease, *, key: str, reason: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            self._all(conn, "mark_delivery_uncertain", run_id=lease.run_id)
            self._event(
                conn,
                lease.run_id,
                "reply.uncertain",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                key=key,
                reason=reason,
            )
            self._finish(conn, lease, "delivery_uncertain", reason)
            return Mark("run.finished", {"status": "delivery_uncertain", "key": key})

        self._transition(lease, body)

    def finish(self, lease: Lease, *, status: str, reason: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            self._finish(conn, lease, status, reason)
            return Mark("run.finished", {"status": status})

        self._transition(lease, body)

    def _finish(
        self, conn: psycopg.Connection[Row], lease: Lease, status: str, reason: str | None
    ) -> None:
        self._all(
            conn, "interrupt_open_model_calls", run_id=lease.run_id, error=f"run ended {status}"
        )
        if self._one(conn, "finish_run", run_id=lease.run_id, status=status, reason=reason) is None:
            raise errors.StaleState(f"run {lease.run_id} is already terminal")
        self._event(
            conn,
            lease.run_id,
            f"run.{status}",
            worker_id=lease.worker_id,
            lease_epoch=lease.epoch,
            reason=reason,
        )

    def release(self, lease: Lease, *, delay_ms: int, why: str) -> None:
        def body(conn: psycopg.Connection[Row]) -> Mark:
            self._all(conn, "release_run", run_id=lease.run_id, delay_ms=delay_ms)
            self._event(
                conn,
                lease.run_id,
                "run.released",
                worker_id=lease.worker_id,
                lease_epoch=lease.epoch,
                delay_ms=delay_ms,
                why=why,
            )
            return Mark(None, {})

        self._transition(lease, body)

    # -- reconciliation ------------------------------------------------------------------

    def reconcile(self, *, limit: int = 100, backoff_ms: int = 50) -> list[tuple[str, str]]:
        """Expired leases -> pending (short backoff), cancelled, or dead_lettered."""
        changed: list[tuple[str, str]] = []
        with self._tx() as conn:
            for row in self._all(conn, "expired_leases", limit=limit):
                run_id = str(row["id"])
                if row["cancel_requested"]:
                    self._cancel(conn, run_id, worker_id=None, epoch=None)
                    to = "cancelled"
                elif row["attempts"] >= row["max_attempts"]:
                    self._all(
                        conn, "interrupt_open_model_calls", run_id=run_id, error="run dead-lettered"
                    )
                    self._all(
                        conn,
                        "finish_run",
                        run_id=run_id,
                        status="dead_lettered",
                        reason=f"lease expired on all {row['attempts']} attempts",
                    )
                    self._event(
                        conn,
                        run_id,
                        "run.dead_lettered",
                        reason="lease expired on the last attempt",
                    )
                    to = "dead_lettered"
                else:
                    self._all(conn, "release_run", run_id=run_id, delay_ms=backoff_ms)
                    to = "pending"
                self._event(
                    conn,
                    run_id,
                    "run.reconciled",
                    from_owner=row["lease_owner"],
                    lease_epoch=row["lease_epoch"],
                    to=to,
                )
                changed.append((run_id, to))
            for row in self._all(conn, "exhausted_pending", limit=limit):
                run_id = str(row["id"])
                self._all(
                    conn,
                    "finish_run",
                    run_id=run_id,
                    status="dead_lettered",
                    reason="no attempts left",
                )
                self._event(conn, run_id, "run.dead_lettered", reason="no attempts left")
                changed.append((run_id, "dead_lettered"))
        return changed

    def expire_history(self, *, retention_s: int, limit: int = 1000) -> int:
        with self._tx() as conn:
            cursor = conn.execute(
                sqlfile.query("expire_checkpoint_history"),
                {"retention_s": retention_s, "limit": limit},
            )
            return cursor.rowcount

    # -- reading for the CLI -------------------------------------------------------------

    def export(self, run_id: str) -> dict[str, list[Row]]:
        tables = (
            "runs",
            "checkpoints",
            "model_calls",
            "tool_calls",
            "budget_ledger",
            "deliveries",
            "events",
        )
        with self._tx() as conn:
            self._all(conn, "read_only_snapshot")
            out = {
                table: [_jsonable(row) for row in self._all(conn, f"export_{table}", run_id=run_id)]
                for table in tables
            }
        if not out["runs"]:
            raise errors.NotFound(f"no run {run_id}")
        return out
