"""Broken variant of the reference engine: after a crash in the delivery window it resends
the reply without asking the sink by key and never ends the run `delivery_uncertain`.

    python tests/quality/engines/resend_reply.py worker   (see resend_reply.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module


def _query_reply(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    memo: worker_module.Memo,
) -> None:
    # BROKEN: a delivery left `sending` by a crash is simply sent again
    self._send_reply(lease, run, memo)


def install() -> None:
    worker_module.Worker._query_reply = _query_reply  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
