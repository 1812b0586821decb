"""Broken variant of the reference engine: a worker that starts resumes the runs leased to
its own worker id at once, without waiting out their lease, and keeps that lease as it is
(owner and epoch): it takes itself for the process that held them, restarted. The lease's
token then names a worker id, not a process, and every fence (the lease check under the
row lock, the check before an external call, the epoch a started call is compared with)
lets a second live process under the same id through. Beside its twin it re-dispatches a
step still in flight: a started call it has no answer for looks like its own unsent one
(vercel/workflow#2780: a wake's replay re-dispatched an in-flight step under the same
correlation id; both attempts ran to completion).

    python tests/quality/engines/resume_own_runs.py worker   (see resume_own_runs.yaml)
"""

from __future__ import annotations

import pathlib
import sys

from reference_engine import cli, events, leases, sqlfile, transitions

QUERIES = pathlib.Path(__file__).with_suffix(".sql")

_claim = transitions.Transitions.claim
_resumed = False  # this process looked for its own runs already


def claim(self: transitions.Transitions, worker_id: str, lease_ms: int) -> leases.Lease | None:
    global _resumed
    if not _resumed:
        with events.transaction(self.db, redact=self.redact) as tx:
            row = tx.one("claim_own_run", worker_id=worker_id, lease_ms=lease_ms)
            lease = None
            if row is not None:
                # BROKEN: the lease is taken over as it is: same owner, same epoch
                lease = leases.Lease(
                    str(row["id"]), worker_id, int(row["lease_epoch"]), int(row["attempts"])
                )
                tx.event(lease, "run.claimed", attempt=lease.attempts, resumed=True)
        _resumed = True
        if lease is not None:
            self.reporter.report("run.claimed", lease.run_id, lease_epoch=lease.epoch)
            return lease
    return _claim(self, worker_id, lease_ms)


def install() -> None:
    sqlfile.queries().update(sqlfile.parse_queries(QUERIES.read_text()))
    transitions.Transitions.claim = claim  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
