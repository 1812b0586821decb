"""Broken variant of the reference engine, two halves of one bug: a step whose worker
stalled past its lease is retried from the start (a started call with no recorded outcome
is sent again, as reexecute_started.py does), and the stalled worker, restored, goes on
without checking that a retry took the step over (no lease check, as skip_lease_check.py).
Both run the step to completion (hatchet-dev/hatchet#4128: a parked durable task's
timeout still ran, so it was failed and retried while the original could still be
restored: a false TIMED_OUT and a duplicate run; the restore path carried "TODO-DURABLE:
check if invocation has increased and if yes, do nothing").

    python tests/quality/engines/retry_beside_restore.py worker   (see retry_beside_restore.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli
from tests.quality.engines import reexecute_started, skip_lease_check


def install() -> None:
    reexecute_started.install()  # BROKEN: the retry sends the in-flight call again
    skip_lease_check.install()  # BROKEN: the restored original is not fenced


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
