"""What the harness's warm fork server imports once for the reference engine's workers
(engine.yaml `preload`): the worker, and the MCP client when the optional `mcp` package
is installed (its import takes over a second, paid otherwise by every worker of a
scenario with tools over MCP)."""

from __future__ import annotations

import contextlib

from reference_engine import worker

with contextlib.suppress(ImportError):
    from reference_engine import mcp_tools

__all__ = ["mcp_tools", "worker"]
