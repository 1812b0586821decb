"""The engine's database layer on a real Postgres: schema constraints, claiming, fencing,
commands, maintenance, error classification."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg.errors
import pytest

import crashcert_probe
from reference_engine import (
    commands,
    connection,
    decide,
    errors,
    inputs,
    leases,
    maintenance,
    migrations,
    reads,
    transitions,
)
from reference_engine import state as state_module

pytestmark = pytest.mark.postgres

TOOL_DECL = {
    "type": "function",
    "function": {"name": "refund_order", "parameters": {"type": "object"}},
    "replay": "non_replayable",
    "queryable": True,
    "requires_approval": False,
    "fingerprint": "f1",
}


def make_input(**kw: Any) -> inputs.RunInput:
    return inputs.RunInput(
        **{
            "run_key": f"k-{uuid.uuid4().hex[:8]}",
            "messages": [{"role": "user", "content": "[crashcert-run: k] hi"}],
            "budgets": {"iterations": 3, "tool_calls": 2, "tokens": 1000},
            "max_attempts": 3,
            **kw,
        }
    )


@pytest.fixture
def db(engine_db: str) -> Iterator[connection.Connector]:
    connector = connection.Connector(engine_db)
    yield connector
    connector.close()


@pytest.fixture
def runs(db: connection.Connector) -> transitions.Transitions:
    return transitions.Transitions(db)


def sql(dsn: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def open_first_model_call(
    runs: transitions.Transitions, lease: leases.Lease, run: state_module.RunState
) -> None:
    """model_ready -> model_pending for turn 0, from the state `run` was loaded in."""
    runs.open_model_call(
        lease,
        expected_version=run.frontier_version,
        point=decide.validated(run),
        call_id=str(uuid.uuid4()),
        turn=0,
        attempt=1,
        interrupt=(),
    )


def drive_to_tool_started(runs: transitions.Transitions, lease: leases.Lease) -> str:
    """model_ready -> model_pending -> tools_pending -> started, through the transitions."""
    open_first_model_call(runs, lease, reads.load(runs.db, lease.run_id))
    run = reads.load(runs.db, lease.run_id)
    call_id = run.model_calls[0].id
    message = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "refund_order", "arguments": '{"order_id": "o"}'},
            }
        ],
    }
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    plan = decide.plan_record(run, call_id, message, usage, {"refund_order": TOOL_DECL})
    runs.record_model_call(
        lease, expected_version=run.frontier_version, plan=plan, response={"raw": True}
    )
    run = reads.load(runs.db, lease.run_id)
    command = run.tool_calls[0]
    runs.start_tool(
        lease,
        command_id=command.id,
        key=command.key,
        tool_call_id=command.tool_call_id,
        charge=True,
    )
    return command.id


def test_migrate_is_idempotent(db: connection.Connector) -> None:
    assert migrations.migrate(db) == []


def test_submit_is_idempotent_on_run_key(db: connection.Connector) -> None:
    run_input = make_input()
    first, created = commands.create_run(db, run_input)
    again, created_again = commands.create_run(db, run_input)
    assert created and not created_again and first == again
    run = reads.load(db, first)
    assert (run.status, run.phase, run.frontier_version) == ("pending", "model_ready", 1)


def test_schema_makes_impossible_states_unrepresentable(
    db: connection.Connector, engine_db: str
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    with pytest.raises(psycopg.errors.CheckViolation):  # running without a lease
        sql(engine_db, "UPDATE runs SET status = 'running' WHERE id = %s", run_id)
    with pytest.raises(psycopg.errors.CheckViolation):  # skipping a frontier version
        sql(engine_db, "UPDATE frontiers SET version = 3 WHERE run_id = %s", run_id)
    with pytest.raises(psycopg.errors.CheckViolation):  # model_ready -> reply_ready
        sql(
            engine_db,
            "UPDATE frontiers SET version = 2, phase = 'reply_ready' WHERE run_id = %s",
            run_id,
        )
    with pytest.raises(psycopg.errors.CheckViolation):  # the event trail is append-only
        sql(engine_db, "UPDATE events SET kind = 'run.failed' WHERE run_id = %s", run_id)
    with pytest.raises(psycopg.errors.CheckViolation):  # no zero-amount billing
        sql(
            engine_db,
            "INSERT INTO budget_ledger (run_id, kind, amount, ref) VALUES (%s, 'tokens', 0, 'x')",
            run_id,
        )
    sql(
        engine_db,
        "INSERT INTO budget_ledger (run_id, kind, amount, ref) VALUES (%s, 'tokens', 5, 'x')",
        run_id,
    )
    with pytest.raises(psycopg.errors.UniqueViolation):  # nothing is billed twice
        sql(
            engine_db,
            "INSERT INTO budget_ledger (run_id, kind, amount, ref) VALUES (%s, 'tokens', 5, 'x')",
            run_id,
        )


def test_frontier_history_is_appended_on_every_save(
    db: connection.Connector, runs: transitions.Transitions, engine_db: str
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w1", 5000)
    assert lease is not None and lease.run_id == run_id and lease.epoch == 1
    drive_to_tool_started(runs, lease)
    rows = sql(
        engine_db,
        "SELECT version, phase FROM checkpoints WHERE run_id = %s ORDER BY version",
        run_id,
    )
    assert rows == [(1, "model_ready"), (2, "model_pending"), (3, "tools_pending")]
    report = reads.load(db, run_id)
    assert report.budget.iterations_used == 1 and report.budget.tool_calls_used == 1
    assert report.budget.tokens_used == 12


def test_concurrent_claims_never_take_the_same_run(engine_db: str) -> None:
    setup = connection.Connector(engine_db)
    run_ids = {commands.create_run(setup, make_input())[0] for _ in range(30)}
    claimed: list[str] = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        mine = connection.Connector(engine_db)
        while (lease := transitions.Transitions(mine).claim(name, 60_000)) is not None:
            with lock:
                claimed.append(lease.run_id)
        mine.close()

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    setup.close()
    assert sorted(claimed) == sorted(run_ids)


def reconcile_once_lapsed(
    db: connection.Connector, *, timeout_s: float = 10
) -> list[tuple[str, str]]:
    """Reconcile until a lease lapses and a run changes; its changes. Nothing signals a
    lease lapsing (it is the clock passing), so this polls, bounded by the deadline."""
    deadline = time.monotonic() + timeout_s
    while not (changed := maintenance.reconcile(db, backoff_ms=0)):
        assert time.monotonic() < deadline, "lease never expired"
        time.sleep(0.05)
    return changed


def test_stale_worker_cannot_settle_after_lease_moved_on(
    db: connection.Connector, runs: transitions.Transitions, engine_db: str
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    old = runs.claim("w-old", 2000)
    assert old is not None
    command_id = drive_to_tool_started(runs, old)
    reconcile_once_lapsed(db)
    new = runs.claim("w-new", 60_000)
    assert new is not None and new.epoch == old.epoch + 1
    with pytest.raises(errors.LeaseLost):
        runs.settle_tool(
            old,
            command_id=command_id,
            tool_call_id="call_1",
            key="k",
            state="succeeded",
            outcome={"result": "late"},
        )
    # the same worker id with the old epoch is just as stale
    stale_same_name = leases.Lease(run_id, "w-new", old.epoch)
    with pytest.raises(errors.LeaseLost):
        runs.settle_tool(
            stale_same_name,
            command_id=command_id,
            tool_call_id="call_1",
            key="k",
            state="succeeded",
            outcome={"result": "late"},
        )
    assert reads.load(db, run_id).tool_calls[0].state == "started"
    kinds = [
        r[0]
        for r in sql(engine_db, "SELECT kind FROM events WHERE run_id = %s ORDER BY id", run_id)
    ]
    assert "tool.succeeded" not in kinds and kinds.count("run.claimed") == 2


def end_session(db: connection.Connector, dsn: str) -> None:
    """Close `db` and wait until the server ended its backend (and so freed its locks)."""
    row = db.connect().execute("SELECT pg_backend_pid() AS pid").fetchone()
    assert row is not None
    pid = row["pid"]
    db.close()
    deadline = time.monotonic() + 10
    while sql(dsn, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", pid):
        assert time.monotonic() < deadline, "the backend never ended"
        time.sleep(0.01)  # the backend exits on its own once it reads EOF


def test_a_holder_whose_session_ended_loses_its_run_at_once(engine_db: str) -> None:
    """The claim took the run's advisory lock; the holder's session ends (SIGKILL, a cut
    link) long before its 60 s lease would: another worker's reconciliation takes it now."""
    holder, other = connection.Connector(engine_db), connection.Connector(engine_db)
    run_id, _ = commands.create_run(other, make_input())
    lease = transitions.Transitions(holder).claim("w-dead", 60_000)
    assert lease is not None and lease.locked
    assert maintenance.reconcile(other, backoff_ms=0) == []  # alive: its lease holds
    end_session(holder, engine_db)  # Postgres frees its locks
    assert maintenance.reconcile(other, backoff_ms=10_000) == [(run_id, "pending")]
    new = transitions.Transitions(other).claim("w-new", 60_000)  # no backoff for the dead
    assert new is not None and new.epoch == lease.epoch + 1 and new.locked
    data = sql(
        engine_db,
        "SELECT data FROM events WHERE run_id = %s AND kind = 'run.reconciled'",
        run_id,
    )
    assert [row[0]["session_ended"] for row in data] == [True]
    other.close()


def test_a_live_holder_keeps_its_run_until_the_lease_lapses(engine_db: str) -> None:
    """A stalled holder keeps its session: neither another session nor its own sees the lock
    free, and only the lapsed lease hands the run over (the fencing tests rely on this)."""
    holder, other = connection.Connector(engine_db), connection.Connector(engine_db)
    run_id, _ = commands.create_run(other, make_input())
    lease = transitions.Transitions(holder).claim("w-stalled", 1000)
    assert lease is not None and lease.locked
    assert maintenance.reconcile(other, backoff_ms=0) == []
    assert maintenance.reconcile(holder, backoff_ms=0) == []  # its own lock is not free
    changed = reconcile_once_lapsed(other)
    assert changed == [(run_id, "pending")]
    data = sql(
        engine_db,
        "SELECT data FROM events WHERE run_id = %s AND kind = 'run.reconciled'",
        run_id,
    )
    assert [row[0]["session_ended"] for row in data] == [False]
    holder.close()
    other.close()


def test_a_holder_on_a_new_session_takes_the_lock_again_or_stops(engine_db: str) -> None:
    """Reconnected (cut link, restarted server), the holder takes the run's lock again before
    its next external call; when a reconciliation took the run first, it stops."""
    holder, other = connection.Connector(engine_db), connection.Connector(engine_db)
    commands.create_run(other, make_input())
    lease = transitions.Transitions(holder).claim("w-1", 60_000)
    assert lease is not None and lease.locked
    end_session(holder, engine_db)
    leases.ensure_live(holder, lease)  # a new session: lock taken again, lease still live
    assert maintenance.reconcile(other, backoff_ms=0) == []  # so the run stays with it
    end_session(holder, engine_db)
    assert maintenance.reconcile(other, backoff_ms=0) != []  # this time the other was first
    with pytest.raises(errors.LeaseLost):
        leases.ensure_live(holder, lease)
    holder.close()
    other.close()


class SlowReporter(crashcert_probe.Reporter):
    """Holds the transaction at before_commit past the lease, like a SIGSTOP there."""

    def __init__(self, pause_s: float) -> None:
        super().__init__("unused", worker_id="w")
        self.pause_s = pause_s
        self.seen: list[str] = []

    def report(self, boundary: str, run_id: str, **detail: Any) -> None:
        self.seen.append(boundary)
        if boundary.endswith(crashcert_probe.BEFORE_COMMIT):
            time.sleep(self.pause_s)  # simulates a stopped process, not a wait for a condition


def test_lease_expiring_at_before_commit_rolls_the_transition_back(engine_db: str) -> None:
    reporter = SlowReporter(pause_s=2.5)
    db = connection.Connector(engine_db)
    runs = transitions.Transitions(db, reporter=reporter)
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 1500)
    assert lease is not None
    run = reads.load(db, run_id)
    with pytest.raises(errors.LeaseLost, match="before commit"):
        open_first_model_call(runs, lease, run)
    after = reads.load(db, run_id)
    assert (after.phase, after.frontier_version, after.model_calls) == ("model_ready", 1, ())
    assert after.budget.iterations_used == 0
    assert reporter.seen == ["run.claimed", "model.pending:before_commit"]
    db.close()


class StatementLog(crashcert_probe.Reporter):
    """Writes each report into the same list as the transaction's statements."""

    def __init__(self, log: list[str]) -> None:
        super().__init__("unused", worker_id="w")
        self.log = log

    def report(self, boundary: str, run_id: str, **detail: Any) -> None:
        self.log.append(f"report {boundary}")


def test_nothing_but_commit_follows_the_before_commit_report(
    engine_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contract's promise: a fault at `:before_commit` strikes the COMMIT itself (a
    commit_lost fault must lose the COMMIT's answer, not that of a last query)."""
    log: list[str] = []
    db = connection.Connector(engine_db)
    runs = transitions.Transitions(db, reporter=StatementLog(log))
    statement = connection.Transaction.all

    def logged(self: connection.Transaction, query: str, /, **params: Any) -> list[Any]:
        log.append(query)
        return statement(self, query, **params)

    monkeypatch.setattr(connection.Transaction, "all", logged)
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    run = reads.load(db, run_id)
    del log[:]
    open_first_model_call(runs, lease, run)
    before = log.index("report model.pending:before_commit")
    assert log[0] == "lock_run" and before > 1
    assert log[before + 1 :] == ["report model.pending"], log
    db.close()


def test_cancel_of_a_running_run_is_honoured_by_its_next_transition(
    db: connection.Connector, runs: transitions.Transitions
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    drive_to_tool_started(runs, lease)
    assert commands.request_cancel(db, run_id) == "cancel_requested"
    with pytest.raises(errors.RunCancelled):
        runs.settle_tool(
            lease,
            command_id=reads.load(db, run_id).tool_calls[0].id,
            tool_call_id="call_1",
            key="k",
            state="succeeded",
            outcome={},
        )
    run = reads.load(db, run_id)
    assert run.status == "cancelled" and run.lease_owner is None
    assert [c.state for c in run.tool_calls] == ["cancelled"]
    assert commands.request_cancel(db, run_id) == "cancelled"


def test_cancel_of_a_pending_run_is_immediate(
    db: connection.Connector, runs: transitions.Transitions
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    assert commands.request_cancel(db, run_id) == "cancelled"
    assert runs.claim("w", 1000) is None
    with pytest.raises(errors.NotFound):
        commands.request_cancel(db, str(uuid.uuid4()))


def test_expired_lease_on_last_attempt_is_dead_lettered(
    db: connection.Connector, runs: transitions.Transitions
) -> None:
    run_id, _ = commands.create_run(db, make_input(max_attempts=1))
    assert runs.claim("w", 100) is not None
    changed = reconcile_once_lapsed(db)
    assert changed == [(run_id, "dead_lettered")]
    assert reads.load(db, run_id).status == "dead_lettered"


def test_approval_commands_only_apply_to_waiting_calls(
    db: connection.Connector, runs: transitions.Transitions
) -> None:
    commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    command_id = drive_to_tool_started(runs, lease)
    with pytest.raises(errors.Conflict, match="not awaiting approval"):
        commands.decide_approval(db, command_id, approve=True)
    with pytest.raises(errors.NotFound):
        commands.decide_approval(db, str(uuid.uuid4()), approve=False)


def test_retention_expires_old_history_of_finished_runs_only(
    db: connection.Connector, runs: transitions.Transitions, engine_db: str
) -> None:
    finished, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    drive_to_tool_started(runs, lease)
    runs.finish(lease, status="failed", reason="test")
    open_run, _ = commands.create_run(db, make_input())
    assert maintenance.expire_history(db, retention_s=3600) == 0  # too recent
    assert maintenance.expire_history(db, retention_s=0, limit=1) == 1  # bounded batch
    assert maintenance.expire_history(db, retention_s=0) == 1
    assert sql(engine_db, "SELECT version FROM checkpoints WHERE run_id = %s", finished) == [(3,)]
    assert sql(engine_db, "SELECT count(*) FROM checkpoints WHERE run_id = %s", open_run) == [(1,)]


def test_export_is_json_safe(db: connection.Connector) -> None:
    import json

    run_id, _ = commands.create_run(db, make_input())
    exported = reads.export(db, run_id)
    assert set(exported) == {
        "runs",
        "checkpoints",
        "model_calls",
        "tool_calls",
        "budget_ledger",
        "deliveries",
        "events",
    }
    json.dumps(exported)
    assert exported["runs"][0]["id"] == run_id


def test_errors_are_classified_by_sqlstate() -> None:
    assert isinstance(
        connection.classify(psycopg.errors.SerializationFailure()), errors.RetryableConflict
    )
    assert isinstance(
        connection.classify(psycopg.errors.DeadlockDetected()), errors.RetryableConflict
    )
    assert isinstance(
        connection.classify(psycopg.errors.AdminShutdown()), errors.DatabaseUnavailable
    )
    assert isinstance(
        connection.classify(psycopg.errors.ConnectionFailure()), errors.DatabaseUnavailable
    )
    assert isinstance(
        connection.classify(psycopg.OperationalError("socket gone")), errors.DatabaseUnavailable
    )
    assert connection.classify(psycopg.errors.UniqueViolation()) is None


def test_unreachable_database_is_unavailable_not_a_crash() -> None:
    db = connection.Connector("host=127.0.0.1 port=1 dbname=x user=x connect_timeout=1")
    with pytest.raises(errors.DatabaseUnavailable):
        reads.load(db, str(uuid.uuid4()))


@pytest.mark.parametrize(
    "status", ["failed", "budget_exhausted", "dead_lettered", "delivery_uncertain", "cancelled"]
)
def test_every_terminal_status_can_be_recorded_with_its_event(
    db: connection.Connector, runs: transitions.Transitions, engine_db: str, status: str
) -> None:
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    runs.finish(lease, status=status, reason="test")
    assert reads.load(db, run_id).status == status
    kinds = [r[0] for r in sql(engine_db, "SELECT kind FROM events WHERE run_id = %s", run_id)]
    assert f"run.{status}" in kinds


def test_a_transaction_stopped_at_before_commit_is_ended_by_the_server(engine_db: str) -> None:
    """A worker SIGSTOPped inside a transaction must not hold its run row forever: the
    server's idle-in-transaction timeout ends the session and nothing commits."""
    reporter = SlowReporter(pause_s=2.0)
    db = connection.Connector(engine_db, idle_in_transaction_ms=500)
    runs = transitions.Transitions(db, reporter=reporter)
    run_id, _ = commands.create_run(db, make_input())
    lease = runs.claim("w", 60_000)
    assert lease is not None
    run = reads.load(db, run_id)
    with pytest.raises(errors.DatabaseUnavailable, match="25P03"):
        open_first_model_call(runs, lease, run)
    after = reads.load(db, run_id)  # reconnects by itself
    assert (after.phase, after.frontier_version, after.budget.iterations_used) == (
        "model_ready",
        1,
        0,
    )
    db.close()


def test_the_adapter_answers_after_its_kept_connection_died(engine_db: str) -> None:
    """A kept adapter connection killed under it (a restarted server) costs the next read
    nothing: it is asked once more on a fresh connection (soak reads reports after
    pg_restart; the first read after one used to fail with "server closed the connection")."""
    from reference_engine import adapter

    run_input = make_input().model_dump(mode="json")
    run_id = adapter.submit(engine_db, run_input)
    try:
        before = adapter.report(engine_db, run_id)
        pids = sql(
            engine_db,
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            "reference_engine adapter",
        )
        assert pids, "the adapter keeps a connection"
        for (pid,) in pids:
            sql(engine_db, "SELECT pg_terminate_backend(%s)", pid)
        assert adapter.report(engine_db, run_id)["status"] == before["status"]
        assert adapter.export(engine_db, run_id)
    finally:
        adapter.forget(engine_db)
