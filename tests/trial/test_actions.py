"""A scenario's actions fire at their point, retry a failing command, and leave the trial
INCONCLUSIVE when they never fire (harness/trial/actions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from harness import errors
from harness.checkers import applied, verdict
from harness.contract import run_report
from harness.record import history, recorder
from harness.scenario import schema
from harness.trial import actions

RUN_ID = "run-1"


def scenario(*action_list: dict[str, Any]) -> schema.Scenario:
    return schema.parse(
        {
            "name": "acts",
            "input": {"user": "Go."},
            "tools": [
                {
                    "name": "wire",
                    "replay": "non_replayable",
                    "effect": "write",
                    "requires_approval": True,
                }
            ],
            "turns": [
                {"tool_calls": [{"id": "call_wire", "name": "wire"}]},
                {"content": "Done."},
            ],
            "actions": list(action_list),
        }
    )


class FakeEngine:
    def __init__(self, *, commands: tuple[str, ...] = ("approve", "reject", "cancel")) -> None:
        self.commands = commands
        self.state = "reserved"
        self.failures = 0
        self.done: list[tuple[str, str, str | None]] = []

    def can(self, action: str) -> bool:
        return action in self.commands

    def act(self, dsn: str, action: str, run_id: str, tool_call_id: str | None = None) -> None:
        if self.failures:
            self.failures -= 1
            raise errors.CrashcertError("database down")
        self.done.append((action, run_id, tool_call_id))

    def report(self, dsn: str, run_id: str) -> run_report.RunReport:
        return run_report.RunReport.model_validate(
            {
                "run_id": run_id,
                "status": "waiting" if self.state == "awaiting_approval" else "running",
                "frontier": {"phase": "tools_pending", "version": 3},
                "delivery": {"state": "none"},
                "tool_calls": [
                    {"id": "call_wire", "name": "wire", "key": "k", "state": self.state, "turn": 0}
                ],
            }
        )


def actor(engine: FakeEngine, item: schema.Scenario) -> tuple[actions.Actor, recorder.Recorder]:
    rec = recorder.Recorder()
    return actions.Actor(engine, "dsn", RUN_ID, item, rec), rec


def trial_of(item: schema.Scenario, rec: recorder.Recorder) -> history.TrialHistory:
    return history.TrialHistory(
        trial_id="t", engine="e", scenario=item, run_key="rk", events=rec.events()
    )


def test_approve_waits_for_the_call_to_await_approval() -> None:
    item = scenario({"do": "approve", "call": "call_wire"})
    engine = FakeEngine()
    act, rec = actor(engine, item)
    act.step()
    assert engine.done == [] and act.waiting
    engine.state = "awaiting_approval"
    act.step()
    assert engine.done == [("approve", RUN_ID, "call_wire")] and not act.waiting
    act.close()
    [taken] = rec.events()
    assert isinstance(taken, history.ActionTaken) and taken.ok
    assert 0 < taken.requested_seq < taken.seq
    assert applied.actions_result(trial_of(item, rec)).verdict is verdict.Verdict.PASS


def test_cancel_fires_once_its_boundary_was_reported() -> None:
    item = scenario({"do": "cancel", "at": "tool.started#1"})
    engine = FakeEngine()
    act, rec = actor(engine, item)
    act.step()
    assert engine.done == []
    rec.append(
        history.BoundaryHit(point="tool.started", occurrence=1, run_id=RUN_ID, worker_id="w", pid=1)
    )
    act.step()
    assert engine.done == [("cancel", RUN_ID, None)]


def test_a_failing_command_is_tried_again() -> None:
    item = scenario({"do": "reject", "call": "call_wire"})
    engine = FakeEngine()
    engine.state, engine.failures = "awaiting_approval", 1
    act, _rec = actor(engine, item)
    act.step()
    assert engine.done == [] and act.waiting
    act.step()
    assert engine.done == [("reject", RUN_ID, "call_wire")]


def test_an_engine_without_the_command_makes_the_trial_inconclusive() -> None:
    item = scenario({"do": "approve", "call": "call_wire"})
    act, rec = actor(FakeEngine(commands=("cancel",)), item)
    act.step()
    act.close()
    result = applied.actions_result(trial_of(item, rec))
    assert result.verdict is verdict.Verdict.INCONCLUSIVE
    assert "no approve command" in " ".join(result.evidence)


def test_an_action_whose_point_never_came_is_not_applied() -> None:
    item = scenario({"do": "cancel", "at": "tool.returned#2"})
    act, rec = actor(FakeEngine(), item)
    act.step()
    act.close()
    result = applied.actions_result(trial_of(item, rec))
    assert result.verdict is verdict.Verdict.INCONCLUSIVE
    assert "never came" in " ".join(result.evidence)


def test_scenario_rejects_malformed_actions() -> None:
    for bad in (
        {"do": "approve"},
        {"do": "cancel"},
        {"do": "cancel", "at": "nowhere#1"},
        {"do": "reject", "call": "call_other"},
    ):
        with pytest.raises(errors.CrashcertError):
            scenario(bad)
