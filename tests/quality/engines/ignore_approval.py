"""Broken variant of the reference engine: it ignores `requires_approval` in the tool
declarations and runs gated tools without waiting for an operator.

    python tests/quality/engines/ignore_approval.py worker   (see ignore_approval.yaml)
"""

from __future__ import annotations

import dataclasses
import sys

from reference_engine import checkpoint, cli, decide
from reference_engine import state as state_module

_tools_pending = decide._tools_pending


def tools_pending(
    run: state_module.RunState, point: checkpoint.Checkpoint, known: state_module.Known
) -> decide.Action:
    # BROKEN: every declaration reads as if no approval were required
    calls = tuple(
        dataclasses.replace(
            call, declaration={**(call.declaration or {}), "requires_approval": False}
        )
        for call in run.tool_calls
    )
    return _tools_pending(dataclasses.replace(run, tool_calls=calls), point, known)


def install() -> None:
    decide._tools_pending = tools_pending


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
