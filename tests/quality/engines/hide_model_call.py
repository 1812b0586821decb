"""Broken variant of the reference engine: its RunReport keeps one model call per turn,
the turn's first attempt, and bills only the calls it lists. When a turn's first answer is
lost to a crash and the model is asked again, the answer the run went on with disappears
from the report, tokens and all, and the report still adds up.

Only the report is broken: the in-process adapter the harness reads reports through (this
module: `python_adapter` in hide_model_call.yaml) and the `status` command. The workers are
the reference engine's.

    python tests/quality/engines/hide_model_call.py status RUN_ID   (see hide_model_call.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import adapter, cli
from reference_engine import report as report_module
from reference_engine import state as state_module

TOTAL_TOKENS = "total_tokens"
RECORDED = "recorded"
_build = report_module.build

# What the harness calls in process besides `report`: the reference engine's own.
migrate = adapter.migrate
submit = adapter.submit
export = adapter.export


def hide(report: dict[str, Any]) -> dict[str, Any]:
    first: dict[int, dict[str, Any]] = {}
    for call in report["model_calls"]:  # ordered by turn, then attempt
        # BROKEN: one row per turn, so a retried turn shows its first (interrupted) try
        first.setdefault(call["turn"], call)
    calls = list(first.values())
    billed = sum(
        int((call["usage"] or {}).get(TOTAL_TOKENS, 0))
        for call in calls
        if call["state"] == RECORDED
    )
    budget = {**report["budget"], "tokens": {**report["budget"]["tokens"], "used": billed}}
    return {**report, "model_calls": calls, "budget": budget}


def report(dsn: str, run_id: str) -> dict[str, Any]:
    # Not by patching report_module.build: the reference engine's adapter runs in the
    # same harness process and must stay whole.
    return hide(adapter.report(dsn, run_id))


def build(run: state_module.RunState) -> dict[str, Any]:
    return hide(_build(run))


def install() -> None:
    # only this module's own process (the status command, a worker) runs this
    report_module.build = build


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
