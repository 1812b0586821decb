"""Broken variant of the reference engine: it marks the run succeeded (and the delivery
delivered) before the reply is posted to the sink; a crash in between loses the reply.

    python tests/quality/engines/done_before_delivery.py worker   (see done_before_delivery.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, decide, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module


def _send_reply(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    memo: worker_module.Memo,
) -> None:
    delivery = run.delivery
    assert delivery is not None
    content = decide.validated(run).reply or ""
    self.runs.mark_sending(lease, key=delivery.key)
    # BROKEN: the terminal status is committed first, the reply posted afterwards
    self.runs.finish_delivered(lease, key=delivery.key)
    if self.services.send_reply(run.run_id, content, delivery.key) == "sent":
        self.reporter.report("reply.sent", lease.run_id, key=delivery.key)
        memo.reply_acked = True


def install() -> None:
    worker_module.Worker._send_reply = _send_reply  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
