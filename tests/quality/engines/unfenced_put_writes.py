"""Broken variant of the reference engine: a model answer is saved the moment it arrives,
as the pending write of the task that asked for it (its tokens billed, the answer and its
usage journalled as an event), by a writer that assumes it is the run's only one: that
write checks no lease. The answer is then recorded as the reference engine does. A worker
stalled between the answer and that write wakes up after another worker adopted the run
and writes anyway (langchain-ai/langgraph#8796: checkpoint writes are assumed
single-writer; a worker SIGSTOPed inside a model call thaws after another took the thread
over, and both put the same task's writes).

    python tests/quality/engines/unfenced_put_writes.py worker   (see unfenced_put_writes.yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, events, leases
from reference_engine import state as state_module
from reference_engine import worker as worker_module

_call_model = worker_module.Worker._call_model


def call_model(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    call_id: str,
    memo: worker_module.Memo,
) -> None:
    _call_model(self, lease, run, call_id, memo)
    if call_id not in memo.model_answers:
        return  # lost or failed: nothing to write
    answer, _ = memo.model_answers[call_id]
    tokens = int(answer.usage.get("total_tokens", 0) or 0)
    # BROKEN: no lease check; the write is keyed by the call, whoever holds the run now
    with events.transaction(self.db, redact=self.settings.redact) as tx:
        if tokens > 0:
            tx.all("charge_budget", run_id=lease.run_id, kind="tokens", amount=tokens, ref=call_id)
        tx.event(
            lease, "checkpoint.saved", call_id=call_id, usage=answer.usage, answer=answer.message
        )


def install() -> None:
    worker_module.Worker._call_model = call_model  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
