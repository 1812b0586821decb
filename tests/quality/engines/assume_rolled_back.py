"""Broken variant of the reference engine: when the COMMIT recording a delivered reply fails
(the connection died, so its outcome is unknown), it assumes the transaction rolled back,
i.e. the delivery step never happened, and does the whole step again: reply included.

The reference engine treats the outcome as unknown: it re-reads the run and finds it
finished (the COMMIT landed, only its acknowledgement was lost) or still `sending` (it never
arrived), and asks the sink by key before it would ever send again.

    python tests/quality/engines/assume_rolled_back.py worker   (see assume_rolled_back.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, decide, errors, leases
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
    leases.ensure_live(self.db, lease, margin_s=self._lease_margin_s)
    delay = self._db_backoff()
    while True:
        if self.services.send_reply(run.run_id, content, delivery.key) != "sent":
            return  # the next decision sees `sending` and asks the sink
        self.reporter.report("reply.sent", lease.run_id, key=delivery.key)
        memo.reply_acked = True
        try:
            self.runs.finish_delivered(lease, key=delivery.key)
            return
        except errors.DatabaseUnavailable:
            # BROKEN: "the COMMIT failed, so nothing was recorded": deliver again
            memo.reply_acked = False
            self.stopping.wait(next(delay))


def install() -> None:
    worker_module.Worker._send_reply = _send_reply  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
