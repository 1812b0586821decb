"""Broken variant of the reference engine: the reply goes out before anything durable says
it may have. The delivery is marked `sending` only once the sink acknowledged it, so a
worker killed in between leaves the delivery `pending`, and the retry writes it again
(dbos-inc/dbos-transact-py#770: a stream write from inside a step records no operation and
has no execution guard, so every retry of the step appends the value once more).

    python tests/quality/engines/reply_before_record.py worker   (see reply_before_record.yaml)
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
    """Worker._send_reply with the write ahead of its record (the only change)."""
    delivery = run.delivery
    assert delivery is not None
    content = decide.validated(run).reply or ""
    leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
    # BROKEN: posted first; `sending` is recorded only after the sink acknowledged it
    outcome = self.services.send_reply(run.run_id, content, delivery.key)
    if outcome == "sent":
        self.reporter.report("reply.sent", lease.run_id, key=delivery.key)
        memo.reply_acked = True
        self.runs.mark_sending(lease, key=delivery.key)
        self.runs.finish_delivered(lease, key=delivery.key)


def install() -> None:
    worker_module.Worker._send_reply = _send_reply  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
