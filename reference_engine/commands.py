"""What clients and operators ask of the engine: submit a run, cancel it, approve or reject
a tool call, purge a finished run. None of these needs a lease; each is one transaction."""

from __future__ import annotations

import crashcert_probe
from reference_engine import checkpoint as checkpoint_module
from reference_engine import connection, errors, events, transitions
from reference_engine import inputs as inputs_module
from reference_engine import state as state_module


def create_run(
    db: connection.Connector, run_input: inputs_module.RunInput, *, redact: bool = False
) -> tuple[str, bool]:
    """Store a new run (idempotent on run_key): (run_id, created)."""
    point = checkpoint_module.dump(checkpoint_module.initial(run_input.messages))
    with events.transaction(db, redact=redact) as tx:
        row = tx.one(
            "create_run",
            run_key=run_input.run_key,
            input=run_input.model_dump(mode="json"),
            iterations=run_input.budgets.iterations,
            tool_calls=run_input.budgets.tool_calls,
            tokens=run_input.budgets.tokens,
            max_attempts=run_input.max_attempts,
        )
        if row is None:
            existing = tx.one("run_id_by_key", run_key=run_input.run_key)
            assert existing is not None
            return str(existing["id"]), False
        run_id = str(row["id"])
        tx.all(
            "insert_frontier",
            run_id=run_id,
            phase="model_ready",
            checkpoint=point,
            checkpoint_version=checkpoint_module.written_format(),
        )
        tx.event(run_id, "run.created", run_key=run_input.run_key)
        tx.event(run_id, "checkpoint.saved", phase="model_ready", version=1)
    return run_id, True


def request_cancel(db: connection.Connector, run_id: str, *, redact: bool = False) -> str:
    """Cancel now when nobody holds the run; else flag it for the lease holder."""
    with events.transaction(db, redact=redact) as tx:
        row = tx.one("lock_run_plain", run_id=run_id)
        if row is None:
            raise errors.NotFound(f"no run {run_id}")
        status = row["status"]
        if status in state_module.TERMINAL:
            return str(status)
        tx.all("request_cancel", run_id=run_id)
        tx.event(run_id, "run.cancel_requested", previous=status)
        if status in ("pending", "waiting"):
            transitions.cancel(tx, run_id)
            return "cancelled"
        return "cancel_requested"


def decide_approval(
    db: connection.Connector, command_id: str, *, approve: bool, redact: bool = False
) -> str:
    with events.transaction(db, redact=redact) as tx:
        found = tx.one("find_tool_call", command_id=command_id)
        if found is None:
            raise errors.NotFound(f"no tool call (command) {command_id}")
        run_id = str(found["run_id"])
        run = tx.one("lock_run_plain", run_id=run_id)  # run first: lock order
        assert run is not None
        if run["status"] in state_module.TERMINAL:
            raise errors.Conflict(f"run {run_id} is already {run['status']}")
        if approve:
            done = tx.one("approve_tool_call", command_id=command_id)
        else:
            done = tx.one(
                "reject_tool_call",
                command_id=command_id,
                outcome={"error": "rejected by an operator; not executed"},
            )
        if done is None:
            call = tx.one("lock_tool_call", command_id=command_id)
            raise errors.Conflict(
                f"tool call {command_id} is not awaiting approval "
                f"(state {call and call['state']}, approval {call and call['approval']})"
            )
        tx.event(run_id, "tool.approved" if approve else "tool.rejected", command_id=command_id)
        tx.all("wake_run", run_id=run_id)
    return "approved" if approve else "rejected"


def command_id_of(db: connection.Connector, run_id: str, tool_call_id: str) -> str:
    """The engine's id of a run's tool call, from the model's tool-call id."""
    with db.transaction() as tx:
        row = tx.one("find_tool_call_of_run", run_id=run_id, tool_call_id=tool_call_id)
    if row is None:
        raise errors.NotFound(f"run {run_id} has no tool call {tool_call_id}")
    return str(row["id"])


PURGED = "run.purged"


def purge_run(
    db: connection.Connector, run_id: str, *, reporter: crashcert_probe.Reporter | None = None
) -> str:
    """Retention: delete a finished run and every record of it in one transaction, so an
    interrupted purge leaves all of it or none (dbos-transact-py #769: a purge in two steps
    left step outputs that a run reusing the key replayed). Idempotent: a run already gone
    is "absent", so a purge interrupted after its COMMIT can simply be run again."""
    reporter = reporter or crashcert_probe.default()
    with db.transaction() as tx:
        row = tx.one("lock_run_plain", run_id=run_id)
        if row is None:
            return "absent"
        if row["status"] not in state_module.TERMINAL:
            raise errors.Conflict(f"run {run_id} is {row['status']}: only a finished run is purged")
        tx.all("purge_run", run_id=run_id)
        # nothing but COMMIT follows (no event: the run's events go with it)
        reporter.report(PURGED + crashcert_probe.BEFORE_COMMIT, run_id)
    reporter.report(PURGED, run_id)
    return "purged"
