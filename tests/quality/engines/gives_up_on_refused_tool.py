"""Broken variant of the reference engine: a tool call refused for 0.3 s is given up.

A refused connection means the request never left: nothing was applied and the same key
may be sent again once the link is back (CONTRACT.md section 5, "Links to the world
services"). This variant retries for 0.3 s, then settles the call `failed`, tells the model
"error" and goes on. The scripted model answers its script whatever it is told, so the run
ends `succeeded` with the reply "Your order has been refunded" over a refund the payment
service never saw. Only a cut link that outlasts 0.3 s shows it (tool_cut heals after 2.5
leases); every invariant but `tool.at_least_once` passes such a run.

    python tests/quality/engines/gives_up_on_refused_tool.py worker   (see its .yaml)
"""

from __future__ import annotations

import sys
import time

from reference_engine import cli, services

GIVE_UP_S = 0.3
RETRY_S = 0.05

_call_tool = services.Services._call_tool
_run_tool = services.Services.run_tool


class GaveUp(Exception):
    pass


def call_tool(self: services.Services, name: str, body: bytes, key: str) -> services.Reply:
    start = time.monotonic()
    while True:
        try:
            return _call_tool(self, name, body, key)
        except services.NotSent as error:
            if time.monotonic() - start >= GIVE_UP_S:
                raise GaveUp(f"tool service unreachable: {error}") from None
            time.sleep(RETRY_S)


def run_tool(
    self: services.Services, name: str, arguments: str, key: str, declaration: dict[str, object]
) -> services.ToolResult:
    try:
        return _run_tool(self, name, arguments, key, declaration)
    except GaveUp as error:
        # BROKEN: "not sent" is taken for the call's failure; the run goes on as if done
        return services.ToolResult("failed", {"error": str(error)})


def install() -> None:
    services.Services._call_tool = call_tool  # type: ignore[method-assign]
    services.Services.run_tool = run_tool  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
