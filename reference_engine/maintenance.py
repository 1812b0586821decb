"""Housekeeping no single worker owns: runs whose lease expired, and checkpoint retention.

Both run in the worker loop and in `reconcile`; every pass is one bounded transaction.
"""

from __future__ import annotations

from typing import Any

from reference_engine import connection, events, transitions


def reconcile(
    db: connection.Connector, *, redact: bool = False, limit: int = 100, backoff_ms: int = 50
) -> list[tuple[str, str]]:
    """Expired leases (or ended holders) -> pending (short backoff), cancelled, or dead_lettered."""
    changed: list[tuple[str, str]] = []
    with events.transaction(db, redact=redact) as tx:
        for row in tx.all("expired_leases", limit=limit):
            changed.append((str(row["id"]), recover_expired(tx, row, backoff_ms=backoff_ms)))
        changed.extend(dead_letter_exhausted(tx, limit=limit))
    return changed


def work_waiting(db: connection.Connector) -> bool:
    """Whether `reconcile` or a claim could find anything now (one cheap statement): an
    idle worker polls with this and runs both passes only when it says so."""
    row = db.one("work_waiting")
    return bool(row and row["waiting"])


def recover_expired(tx: events.Tx, row: dict[str, Any], *, backoff_ms: int) -> str:
    """One run whose lease expired, or whose holder's session ended: its new status."""
    run_id = str(row["id"])
    session_ended = bool(row.get("session_ended"))
    if row["cancel_requested"]:
        transitions.cancel(tx, run_id)
        to = "cancelled"
    elif row["attempts"] >= row["max_attempts"]:
        tx.all("interrupt_open_model_calls", run_id=run_id, error="run dead-lettered")
        tx.all(
            "finish_run",
            run_id=run_id,
            status="dead_lettered",
            reason=f"lease expired on all {row['attempts']} attempts",
        )
        tx.event(run_id, "run.dead_lettered", reason="lease expired on the last attempt")
        to = "dead_lettered"
    else:
        # a holder whose session ended is gone for good: nothing to wait for
        delay_ms = 0 if session_ended else backoff_ms
        tx.all("release_run", run_id=run_id, delay_ms=delay_ms)
        to = "pending"
    # the epoch of the lease that expired, with no worker: nobody acted under it
    tx.event(
        run_id,
        "run.reconciled",
        lease_epoch=row["lease_epoch"],
        from_owner=row["lease_owner"],
        to=to,
        session_ended=session_ended,
    )
    return to


def dead_letter_exhausted(tx: events.Tx, *, limit: int) -> list[tuple[str, str]]:
    """Pending runs with no attempts left -> dead_lettered."""
    changed = []
    for row in tx.all("exhausted_pending", limit=limit):
        run_id = str(row["id"])
        tx.all("finish_run", run_id=run_id, status="dead_lettered", reason="no attempts left")
        tx.event(run_id, "run.dead_lettered", reason="no attempts left")
        changed.append((run_id, "dead_lettered"))
    return changed


def expire_history(db: connection.Connector, *, retention_s: int, limit: int = 1000) -> int:
    """Drop up to `limit` superseded checkpoints of runs finished `retention_s` ago."""
    with db.transaction() as tx:
        return tx.rowcount("expire_checkpoint_history", retention_s=retention_s, limit=limit)
