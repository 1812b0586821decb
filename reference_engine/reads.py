"""Reading a run back: the state the worker decides from, and the raw rows for `export`."""

from __future__ import annotations

from reference_engine import connection, errors
from reference_engine import state as state_module

_EXPORTED = (
    "runs",
    "checkpoints",
    "model_calls",
    "tool_calls",
    "budget_ledger",
    "deliveries",
    "events",
)


def load(db: connection.Connector, run_id: str) -> state_module.RunState:
    # one statement = one snapshot: the frontier and its audit rows agree
    row = db.one("load_state", run_id=run_id)
    if row is None or row["run"] is None:
        raise errors.NotFound(f"no run {run_id}")
    run = row["run"]
    frontier = row["frontier"]
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
        charged=frozenset((item["kind"], item["ref"]) for item in charged),
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
        model_calls=tuple(_model_call(call) for call in row["model_calls"]),
        tool_calls=tuple(_tool_call(call) for call in row["tool_calls"]),
        delivery=state_module.Delivery(delivery["key"], delivery["state"], delivery["attempts"])
        if delivery
        else None,
    )


def _model_call(row: connection.Row) -> state_module.ModelCall:
    return state_module.ModelCall(
        id=str(row["id"]),
        turn=row["turn"],
        attempt=row["attempt"],
        lease_epoch=int(row["lease_epoch"]),
        state=row["state"],
        usage=row["usage"],
    )


def _tool_call(row: connection.Row) -> state_module.ToolCall:
    return state_module.ToolCall(
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


def export(db: connection.Connector, run_id: str) -> dict[str, list[connection.Row]]:
    """Every table's rows of the run, read from one snapshot, as plain JSON values."""
    with db.transaction() as tx:
        tx.all("read_only_snapshot")
        out = {
            table: [connection.jsonable(row) for row in tx.all(f"export_{table}", run_id=run_id)]
            for table in _EXPORTED
        }
    if not out["runs"]:
        raise errors.NotFound(f"no run {run_id}")
    return out
