"""Broken variant of the reference engine: a tool service it cannot reach fails the run.

A refused connection means the request never left: nothing was applied and the same key
may be sent again once the link is back. This variant takes it for the tool's verdict
instead and fails the run on the spot, so a link to the tools that is down for a moment
(a restarted pod, a dropped route: tool_cut) ends a run that a retry would have finished.
Kills, database faults and lost responses never refuse a tool connection: only a cut link
shows it.

    python tests/quality/engines/fail_on_unreachable_tool.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys

from reference_engine import cli, errors, services

_call_tool = services.Services._call_tool


def call_tool(self: services.Services, name: str, body: bytes, key: str) -> services.Reply:
    try:
        return _call_tool(self, name, body, key)
    except services.NotSent as error:
        # BROKEN: "cannot connect" is taken for a permanent failure, not retried
        raise errors.WorldError(f"tool service unreachable: {error}") from None


def install() -> None:
    services.Services._call_tool = call_tool  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
