"""What the harness's warm fork server imports once for the reference engine's workers
(engine.yaml `preload`): the command line `python -m reference_engine worker` runs (cli, its
parser built, and the modules it imports, ~7 ms of CPU in each forked worker otherwise, most
of it copy-on-write faults), the worker, and the MCP client when the optional `mcp` package
is installed (its import takes over a second, paid otherwise by every worker of a scenario
with tools over MCP)."""

from __future__ import annotations

import contextlib

from reference_engine import cli, sqlfile, worker

sqlfile.queries()  # queries.sql parsed once here, not in every worker (~0.5 ms each)

with contextlib.suppress(ImportError):
    from reference_engine import mcp_tools

__all__ = ["cli", "mcp_tools", "worker"]
