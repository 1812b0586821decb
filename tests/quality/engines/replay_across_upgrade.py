"""Broken variant of the reference engine's next version: on recovery it carries a call
started under the old version over to the tool's new declaration ("the new release migrates
in-flight calls to its tool versions") and replays it, though the fingerprint changed. Only
the next version is broken: version N recovers correctly, so kills alone never show it.

    python -m tests.quality.engines.replay_across_upgrade worker   (see replay_across_upgrade.yaml)
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from reference_engine import cli, decide
from reference_engine import state as state_module

_recover_tool = decide.recover_tool


def recover_tool(call: state_module.ToolCall, current: dict[str, Any] | None) -> decide.Recovery:
    # BROKEN: the started call is re-stamped with the declaration the new version sees, so
    # the fingerprint check compares the new version with itself and replays
    if current is not None and call.declaration is not None:
        stamped = {**call.declaration, "fingerprint": current.get("fingerprint")}
        call = dataclasses.replace(call, declaration=stamped)
    return _recover_tool(call, current)


def install() -> None:
    # the worker looks recover_tool up on the module at call time
    decide.recover_tool = recover_tool


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
