"""Broken variant of the reference engine: a run is rescued from a dead worker only once.
Expired leases of runs on their first claim are released as usual; a run already claimed
again (a recovery happened) whose lease lapses once more, because Postgres restarted under
the recovering worker, is never looked at again: it stays `running` under a lease nobody
holds (dbos-inc/dbos-transact-py#716: the error was swallowed, and recovery, which runs
once per dead executor, never came back to the workflow).

    python tests/quality/engines/rescue_once.py worker   (see rescue_once.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, connection, events, maintenance, transitions

# A run claimed more than once was recovered already.
RECOVERED_AFTER_CLAIMS = 1


def reconcile(
    db: connection.Connector, *, redact: bool = False, limit: int = 100, backoff_ms: int = 50
) -> list[tuple[str, str]]:
    """maintenance.reconcile, minus a second rescue of a run (the only change)."""
    changed: list[tuple[str, str]] = []
    with events.transaction(db, redact=redact) as tx:
        for row in tx.all("expired_leases", limit=limit):
            if row["attempts"] > RECOVERED_AFTER_CLAIMS:
                continue  # BROKEN: recovered once already; recovery does not come back to it
            run_id = str(row["id"])
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
                tx.all("release_run", run_id=run_id, delay_ms=backoff_ms)
                to = "pending"
            tx.event(
                run_id,
                "run.reconciled",
                lease_epoch=row["lease_epoch"],
                from_owner=row["lease_owner"],
                to=to,
            )
            changed.append((run_id, to))
        for row in tx.all("exhausted_pending", limit=limit):
            run_id = str(row["id"])
            tx.all("finish_run", run_id=run_id, status="dead_lettered", reason="no attempts left")
            tx.event(run_id, "run.dead_lettered", reason="no attempts left")
            changed.append((run_id, "dead_lettered"))
    return changed


def install() -> None:
    # the worker looks reconcile up on the module at call time
    maintenance.reconcile = reconcile


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
