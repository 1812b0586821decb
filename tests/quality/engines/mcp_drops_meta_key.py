"""Broken variant of the reference engine, over MCP only: a call resent on recovery is
rebuilt from its name and arguments, and its `_meta` (the idempotency key) is lost.

Resending a started call to a service that honours idempotency keys is sound with the
same key (the service answers the first effect); this variant resends without it, so the
service cannot tell it from a new call. Over HTTP the key is a header the resend keeps:
only an MCP scenario shows the bug.

    python tests/quality/engines/mcp_drops_meta_key.py worker   (see mcp_drops_meta_key.yaml)
"""

from __future__ import annotations

import sys
from typing import Any

from reference_engine import cli, decide, mcp_tools
from reference_engine import state as state_module

_recover_tool = decide.recover_tool
_request_meta = mcp_tools.McpTools.request_meta
_resent: set[str] = set()  # keys of calls this worker resends on recovery


def recover_tool(call: state_module.ToolCall, current: dict[str, Any] | None) -> decide.Recovery:
    original = call.declaration or {}
    if (
        current
        and current.get("honours_idempotency_key")
        and original.get("honours_idempotency_key")
    ):
        _resent.add(call.key)  # sound so far: the service deduplicates by key
        return decide.Replay()
    return _recover_tool(call, current)


def request_meta(self: mcp_tools.McpTools, key: str) -> dict[str, Any]:
    # BROKEN: the resend path builds a fresh request (name, arguments) without `_meta`
    return {} if key in _resent else _request_meta(self, key)


def install() -> None:
    # the worker looks recover_tool up on the module at call time
    decide.recover_tool = recover_tool
    mcp_tools.McpTools.request_meta = request_meta  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
