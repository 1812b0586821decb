"""What an engine offers (its description's `capabilities`, CONTRACT.md s. 5) and what a
scenario needs of it: a scenario that needs what the engine does not offer is not run by
`crashcert certify`, and the certificate names what that leaves unproven. Pure.

Defaults follow the description: approve (with reject), cancel and purge are offered when
their commands (or adapter functions) exist; tools over MCP only when declared; tools over
HTTP unless the declared transports leave it out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import pydantic

from harness.faults import spec
from harness.scenario import schema

Transport = Literal["http", "mcp"]
# Capability -> what a scenario that needs it shows, unproven when it is not offered.
UNPROVEN: dict[str, str] = {
    "http": "tools over HTTP",
    "mcp": "tools over MCP (keys in _meta, results over the MCP transport)",
    "approve": "approvals and rejections under faults (tool.approval)",
    "cancel": "cancelling a run in flight",
    "purge": "retention: purging a run and reusing its key (run.single_submit after purge)",
    "upgrade": "resuming a run under the engine's next version (the upgrade fault)",
}
# A scenario action -> the capability it needs.
ACTION_NEEDS = {
    "approve": "approve",
    "reject": "approve",
    "cancel": "cancel",
    "purge": "purge",
    "reuse_key": "purge",
}


class Capabilities(pydantic.BaseModel):
    """`capabilities:` in an engine description; an unset field takes its default."""

    model_config = pydantic.ConfigDict(extra="forbid")

    tools_transports: list[Transport] = pydantic.Field(default=["http"], min_length=1)
    approve: bool | None = None
    cancel: bool | None = None
    purge: bool | None = None
    streaming: bool = False


def offered(engine: Any) -> frozenset[str] | None:
    """The capabilities an engine offers, or None for an engine that cannot say (no
    description: every scenario runs, as before)."""
    description = getattr(engine, "description", None)
    if description is None:
        return None
    declared: Capabilities = getattr(description, "capabilities", None) or Capabilities()
    can = getattr(engine, "can", lambda action: bool(getattr(description, action, None)))
    found: set[str] = set(declared.tools_transports)
    derived = {
        "approve": can("approve") and can("reject"),
        "cancel": can("cancel"),
        "purge": bool(getattr(description, "purge", None)),
    }
    for name, default in derived.items():
        chosen = getattr(declared, name)
        if chosen if chosen is not None else default:
            found.add(name)
    if declared.streaming:
        found.add("streaming")
    if getattr(description, "upgrade", None) is not None:
        found.add("upgrade")
    return frozenset(found)


def needs(scenario: schema.Scenario) -> list[str]:
    """The capabilities a scenario needs, in a stable order."""
    wanted: set[str] = {scenario.tools_transport} if scenario.tools else set()
    wanted |= {ACTION_NEEDS[action.do] for action in scenario.actions}
    return sorted(wanted)


def missing(scenario: schema.Scenario, engine_offers: frozenset[str] | None) -> list[str]:
    """What the scenario needs and the engine does not offer ([] when it can run)."""
    if engine_offers is None:
        return []
    return [name for name in needs(scenario) if name not in engine_offers]


def missing_for_faults(classes: Iterable[str], engine_offers: frozenset[str] | None) -> list[str]:
    """The fault classes that need what the engine does not offer (`upgrade` without a next
    version): not planned for it, INCONCLUSIVE never FAIL."""
    if engine_offers is None:
        return []
    needs = spec.NEEDS
    return [name for name in classes if name in needs and needs[name] not in engine_offers]


def under_fault(scenario: str, fault: str) -> str:
    """How a scenario's trials of one fault class are named where they were not run."""
    return f"{scenario} under {fault}"


def not_run_note(scenario: schema.Scenario, lacking: list[str]) -> str:
    """One line saying why a scenario was not run (`crashcert run` and `matrix`)."""
    unproven = "; ".join(f"{name}: {UNPROVEN.get(name, name)}" for name in lacking)
    return (
        f"{scenario.name} not run: it needs {', '.join(lacking)}, which the engine does not "
        f"offer (capabilities in its description); unproven: {unproven}"
    )


def fault_not_run_note(scenario: schema.Scenario, unoffered: list[str]) -> str:
    """One line saying why a plan with a fault the engine cannot take was not run."""
    needs = sorted({spec.NEEDS[name] for name in unoffered})
    unproven = "; ".join(f"{name}: {UNPROVEN.get(name, name)}" for name in needs)
    return (
        f"{scenario.name} not run: its faults ({', '.join(unoffered)}) need {', '.join(needs)}, "
        f"which the engine does not offer (its description); unproven: {unproven}"
    )
