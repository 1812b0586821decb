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

from reference_engine import cli, connection, events, maintenance

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
            to = maintenance.recover_expired(tx, row, backoff_ms=backoff_ms)
            changed.append((str(row["id"]), to))
        changed.extend(maintenance.dead_letter_exhausted(tx, limit=limit))
    return changed


def install() -> None:
    # the worker looks reconcile up on the module at call time
    maintenance.reconcile = reconcile


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
