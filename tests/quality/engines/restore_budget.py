"""Broken variant of the reference engine: the budget it enforces counts only what was
consumed under the current lease epoch, so every restart hands the run a fresh budget.

    python tests/quality/engines/restore_budget.py worker   (see restore_budget.yaml)
"""

from __future__ import annotations

import dataclasses
import sys

from reference_engine import cli, connection, reads
from reference_engine import state as state_module

_load = reads.load


def load(db: connection.Connector, run_id: str) -> state_module.RunState:
    run = _load(db, run_id)
    epoch = run.lease_epoch
    # BROKEN: consumption is recounted from this epoch's calls only, the ledger ignored
    calls = [call for call in run.model_calls if call.lease_epoch == epoch]
    budget = dataclasses.replace(
        run.budget,
        iterations_used=len(calls),
        tokens_used=sum(int((call.usage or {}).get("total_tokens", 0)) for call in calls),
        tool_calls_used=sum(1 for call in run.tool_calls if call.started_epoch == epoch),
    )
    return dataclasses.replace(run, budget=budget)


def install() -> None:
    # only the worker process runs this module; the harness reads reports unpatched
    reads.load = load


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
