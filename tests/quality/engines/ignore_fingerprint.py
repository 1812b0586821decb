"""Broken variant of the reference engine: on recovery it replays a started replayable
call whatever its tool's fingerprint says now (a tool redeployed since the call was sent).

    python tests/quality/engines/ignore_fingerprint.py worker   (see ignore_fingerprint.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, decide
from reference_engine import state as state_module

_recover_tool = decide.recover_tool


def recover_tool(call: state_module.ToolCall, current: dict[str, Any] | None) -> decide.Recovery:
    # BROKEN: "still replayable, so replay": the fingerprint the call was started with is
    # not compared with the one declared now
    if current is not None and call.declaration is not None:
        current = {**current, "fingerprint": call.declaration.get("fingerprint")}
    return _recover_tool(call, current)


def install() -> None:
    # the worker looks recover_tool up on the module at call time
    decide.recover_tool = recover_tool


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
