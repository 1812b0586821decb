"""`crashcert scenarios`: the bundled scenarios grouped by what they are for, each with the
first sentence of its note (why it exists)."""

from __future__ import annotations

from harness.scenario import schema

GROUPS = (
    ("guarantee", "Guarantees: each promise of the contract exercised"),
    ("incident", "Incidents: public incident classes as named regressions"),
    ("agent_task", "Agent tasks: everyday runs under every fault"),
)


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def lines(scenarios: list[schema.Scenario]) -> list[str]:
    """Group headings, then one line per scenario: name, expected status, its note."""
    out: list[str] = []
    for group, heading in GROUPS:
        members = [item for item in scenarios if item.group == group]
        if not members:
            continue
        if out:
            out.append("")
        out.append(f"{heading} ({len(members)})")
        width = max(len(item.name) for item in members)
        for item in members:
            why = first_sentence(item.note or item.description)
            out.append(f"  {item.name:{width}}  expect={item.expect.status:17} {why}")
    return out
