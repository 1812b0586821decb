"""Broken variant of the reference engine: a worker never re-checks that its claim on a run
still holds. Its decisions take the run to be its own whoever holds it now, its commits
skip the lease check (as skip_lease_check.py), and its heartbeat ignores a refused
extension. A worker stalled past its lease while another worker adopted the run wakes up
and runs the run's body alongside the adopter (dbos-inc/dbos-transact-java#491: launch-time
recovery re-ran a workflow still running in-process; dbos-inc/dbos-transact-py#742: a
recovery attempt whose claim no longer held still executed the workflow body).

    python tests/quality/engines/stale_claim.py worker   (see stale_claim.yaml)
"""

from __future__ import annotations

import dataclasses
import sys

from reference_engine import cli, decide, errors, leases
from reference_engine import heartbeat as heartbeat_module
from reference_engine import state as state_module
from tests.quality.engines import skip_lease_check

_next_action = decide.next_action


def next_action(run: state_module.RunState, known: state_module.Known) -> decide.Action:
    if run.status == "running":
        # BROKEN: the run is ours, whoever holds its lease now
        run = dataclasses.replace(run, lease_owner=known.worker_id, lease_epoch=known.lease_epoch)
    return _next_action(run, known)


def _run(self: heartbeat_module.Heartbeat) -> None:
    """Heartbeat._run, minus noticing that the lease was refused (the `lost` flag)."""
    interval = self.lease_ms / 3000.0
    while not self._stop.wait(interval):
        try:
            leases.extend(self._db, self.lease, self.lease_ms)  # BROKEN: a refusal is ignored
        except (errors.DatabaseUnavailable, errors.RetryableConflict):
            pass


def install() -> None:
    skip_lease_check.install()
    # the worker looks next_action up on the module at call time
    decide.next_action = next_action
    heartbeat_module.Heartbeat._run = _run  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
