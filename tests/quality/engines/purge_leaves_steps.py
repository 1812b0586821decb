"""Broken variant of the reference engine: model answers are also kept as step outputs
keyed by run key and turn, and replayed from there when present; retention purges a run
in two transactions, the run and its records first, its step outputs second. A purge
interrupted between the two leaves the step outputs behind, a second pass no longer finds
the run that would name them, and a new request reusing the key gets the purged run's
answer without the model being asked (dbos-inc/dbos-transact-py#769).

    python tests/quality/engines/purge_leaves_steps.py purge RUN_ID   (see purge_leaves_steps.yaml)
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
from typing import Any

import crashcert_probe
from reference_engine import cli, commands, connection, decide, leases, model_client, sqlfile
from reference_engine import state as state_module
from reference_engine import worker as worker_module

QUERIES = pathlib.Path(__file__).with_suffix(".sql")


def _ensure(tx: connection.Transaction) -> None:
    tx.all("lock_step_outputs")
    tx.all("create_step_outputs")


@dataclasses.dataclass
class _StepOutputs:
    """The worker's model client, behind a store of answers keyed by run key and turn."""

    real: model_client.ModelClient
    db: connection.Connector
    run_id: str
    turn: int

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> model_client.ModelAnswer:
        with self.db.transaction() as tx:
            _ensure(tx)
            row = tx.one("step_output", run_id=self.run_id, turn=self.turn)
        if row is not None:
            # BROKEN: an output recorded under the run key is replayed, whichever run wrote it
            stored = row["answer"]
            return model_client.ModelAnswer(stored["message"], stored["usage"], stored["raw"])
        answer = self.real.complete(messages, tools)
        with self.db.transaction() as tx:
            _ensure(tx)
            tx.all(
                "record_step_output",
                run_id=self.run_id,
                turn=self.turn,
                answer=dataclasses.asdict(answer),
            )
        return answer


_call_model = worker_module.Worker._call_model


def call_model(
    self: worker_module.Worker,
    lease: leases.Lease,
    run: state_module.RunState,
    call_id: str,
    memo: worker_module.Memo,
) -> None:
    real = self.model
    self.model = _StepOutputs(real, self.db, lease.run_id, decide.validated(run).turn)  # type: ignore[assignment]
    try:
        _call_model(self, lease, run, call_id, memo)
    finally:
        self.model = real


def purge_run(
    db: connection.Connector, run_id: str, *, reporter: crashcert_probe.Reporter | None = None
) -> str:
    reporter = reporter or crashcert_probe.default()
    with db.transaction() as tx:
        row = tx.one("lock_run_plain", run_id=run_id)
        if row is None:
            # BROKEN: a second pass finds no run, so nothing names the outputs left behind
            return "absent"
        found = tx.one("run_key_of", run_id=run_id)
        assert found is not None
        tx.all("purge_run", run_id=run_id)
        reporter.report(commands.PURGED + crashcert_probe.BEFORE_COMMIT, run_id)
    reporter.report(commands.PURGED, run_id)
    # BROKEN: the step outputs go in a transaction of their own, after the run
    with db.transaction() as tx:
        _ensure(tx)
        tx.all("purge_step_outputs", run_key=found["run_key"])
    return "purged"


def install() -> None:
    sqlfile.queries().update(sqlfile.parse_queries(QUERIES.read_text()))
    worker_module.Worker._call_model = call_model  # type: ignore[method-assign]
    commands.purge_run = purge_run


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
