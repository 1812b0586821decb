"""`crashcert scenarios`: every bundled scenario listed once, under its group, with why."""

from __future__ import annotations

from harness.scenario import catalog, schema


def test_every_bundled_scenario_is_listed_once_under_its_group() -> None:
    bundled = schema.load_all()
    lines = catalog.lines(bundled)
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert sorted(listed) == sorted(item.name for item in bundled)
    headings = [line for line in lines if line and not line.startswith("  ")]
    assert [h.split(":")[0] for h in headings] == ["Guarantees", "Incidents", "Agent tasks"]
    by_name = {item.name: item for item in bundled}
    group = None
    for line in lines:
        if line and not line.startswith("  "):
            group = {"Guarantees": "guarantee", "Incidents": "incident"}.get(
                line.split(":")[0], "agent_task"
            )
        elif line:
            assert by_name[line.split()[0]].group == group, line


def test_guarantees_and_incidents_say_why_they_exist() -> None:
    for item in schema.load_all():
        if item.group != "agent_task":
            assert item.note, f"{item.name} has no note"
            assert catalog.first_sentence(item.note) in "\n".join(catalog.lines([item]))


def test_first_sentence() -> None:
    assert catalog.first_sentence("One. Two.") == "One."
    assert catalog.first_sentence("No stop\n here") == "No stop here"
