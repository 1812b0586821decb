"""Capabilities (harness/engines/capabilities.py): a scenario that needs what an engine does
not offer is not run by certify and is named with what it leaves unproven; a scenario action
that never applied proves nothing, so it counts against the level."""

from __future__ import annotations

import pathlib

import pydantic
import pytest

from harness import checkers
from harness.campaigns import certify
from harness.checkers import levels
from harness.engines import capabilities, commands
from harness.scenario import schema
from harness.shards import merge_certify
from tests.campaigns import recorded_checks

FRONTIER = "frontier.monotonic"
BASE = "name: e\nmigrate: [x]\nworker: [x]\nsubmit: [x]\nstatus: [x]\n"


def _engine(tmp_path: pathlib.Path, extra: str = "") -> commands.CommandEngine:
    path = tmp_path / "e.yaml"
    path.write_text(BASE + extra)
    return commands.load(path)


def test_offered_follows_the_commands_unless_declared(tmp_path: pathlib.Path) -> None:
    assert capabilities.offered(_engine(tmp_path)) == {"http"}
    with_commands = _engine(tmp_path, "approve: [x]\nreject: [x]\ncancel: [x]\npurge: [x]\n")
    assert capabilities.offered(with_commands) == {"http", "approve", "cancel", "purge"}
    approve_only = _engine(tmp_path, "approve: [x]\n")  # approve without reject: not offered
    assert capabilities.offered(approve_only) == {"http"}
    declared = _engine(
        tmp_path, "cancel: [x]\ncapabilities: {tools_transports: [mcp], cancel: false}\n"
    )
    assert capabilities.offered(declared) == {"mcp"}
    assert "mcp" in capabilities.offered(commands.find("reference"))  # type: ignore[operator]
    assert capabilities.offered(object()) is None  # no description: everything runs


def test_a_description_refuses_an_unknown_capability(tmp_path: pathlib.Path) -> None:
    with pytest.raises(Exception, match="capabilities"):
        _engine(tmp_path, "capabilities: {teleport: true}\n")
    with pytest.raises((pydantic.ValidationError, Exception)):
        _engine(tmp_path, "capabilities: {tools_transports: []}\n")


@pytest.mark.parametrize(
    ("name", "needed"),
    [
        ("refund", ["http"]),
        ("refund_mcp", ["mcp"]),
        ("cancel_in_flight", ["cancel", "http"]),
        ("approval_approved", ["approve", "http"]),
        ("dbos_py_769_reused_key_replays_purged_run", ["purge"]),  # no tools
    ],
)
def test_what_a_scenario_needs(name: str, needed: list[str]) -> None:
    assert capabilities.needs(schema.find(name)) == needed


def test_scenarios_the_engine_cannot_run_are_not_run_and_named() -> None:
    names = ["refund", "refund_mcp", "cancel_in_flight", "approval_approved"]
    found: dict[str, list[str]] = {}
    kept = certify._offered([(n, schema.find(n)) for n in names], frozenset({"http"}), found)
    assert [reference for reference, _ in kept] == ["refund"]
    assert found == {"mcp": ["refund_mcp"], "cancel": ["cancel_in_flight"],
                     "approve": ["approval_approved"]}  # fmt: skip
    cert = certify.Certification(engine="e", engine_ref="e", modes=["boundary"], not_offered=found)
    lines = certify.coverage_lines(cert)
    assert (
        "not offered: cancel (cancel_in_flight not run): cancelling a run in flight unproven"
        in (lines)
    )
    assert certify.to_json(cert)["not_offered"] == found


def _record(label: str, *, actions: str | None) -> merge_certify.RecordedTrial:
    results = [
        {"invariant": name, "verdict": "PASS", **recorded_checks.fields(name)}
        for name in checkers.INVARIANTS
    ]  # fmt: skip
    if actions:
        results.append({"invariant": "scenario.actions", "verdict": actions, "summary": "s"})
    record = {
        "scenario": "dbos_py_769", "label": label, "plan": [], "mode": "boundary",
        "fault_class": "baseline", "verdict": "PASS", "repro": "r", "invariants": results,
    }  # fmt: skip
    return merge_certify.RecordedTrial.of(record, "/nonexistent")


def test_a_scenario_action_that_never_applied_counts_against_the_level() -> None:
    def level(actions: str) -> levels.Level:
        cert = certify.Certification(
            engine="e", engine_ref="e", modes=["boundary"],
            trials=[_record("baseline", actions=actions)], required=[],
        )  # fmt: skip
        return cert.evidence_level

    assert level("PASS") is levels.Level.FULL
    # the purge never ran (no purge command): every PASS of the trial shows nothing
    assert level("INCONCLUSIVE") is levels.Level.NONE
