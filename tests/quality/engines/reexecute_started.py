"""Broken variant of the reference engine: on recovery it re-executes a started
non-replayable tool call instead of asking the service by key or settling it
`outcome_unknown`.

    python tests/quality/engines/reexecute_started.py worker   (see reexecute_started.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, decide
from reference_engine import state as state_module


def recover_tool(call: state_module.ToolCall, current: dict[str, Any] | None) -> decide.Recovery:
    # BROKEN: "it probably did not happen": run it again with the same key, whatever it is
    return decide.Replay()


def install() -> None:
    # the worker looks recover_tool up on the module at call time
    decide.recover_tool = recover_tool


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
