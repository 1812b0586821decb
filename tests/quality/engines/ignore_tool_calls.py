"""Broken variant of the reference engine: it charges tool calls but never refuses one
when the tool-call budget is spent.

    python tests/quality/engines/ignore_tool_calls.py worker   (see ignore_tool_calls.yaml)
"""

from __future__ import annotations

import dataclasses
import sys

from reference_engine import cli, decide
from reference_engine import state as state_module

_start = decide._start


def start(run: state_module.RunState, call: state_module.ToolCall) -> decide.Action:
    # BROKEN: the limit is always one more than what was used
    budget = dataclasses.replace(run.budget, tool_calls=run.budget.tool_calls_used + 1)
    return _start(dataclasses.replace(run, budget=budget), call)


def install() -> None:
    decide._start = start


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
