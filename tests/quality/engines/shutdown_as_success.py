"""Broken variant of the reference engine, after dust-tt/dust PR #30742: the agent loop took
a worker's shutdown for the user's "Stop" and finalized the run as a success. Here a worker
told to stop (SIGTERM, as a deploy does) marks its run succeeded instead of handing it back:
no reply is ever delivered, and a run that had work left ends as if it had done it.

    python tests/quality/engines/shutdown_as_success.py worker   (see shutdown_as_success.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, leases
from reference_engine import worker as worker_module


def _release_on_stop(self: worker_module.Worker, lease: leases.Lease) -> None:
    # BROKEN: the stop is read as the end of the run, not as a reason to give it back
    self.runs.finish(lease, status="succeeded", reason="stopped")


def install() -> None:
    worker_module.Worker._release_on_stop = _release_on_stop  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
