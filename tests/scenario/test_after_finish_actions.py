"""purge and reuse_key: scenario actions done once the run is terminal."""

from __future__ import annotations

import pydantic
import pytest

from harness.scenario import schema


def test_they_happen_at_run_finished() -> None:
    action = schema.Action(do="purge", at="run.finished")
    assert action.do in schema.AFTER_FINISH


@pytest.mark.parametrize("at", ["awaiting_approval", "tool.started#1"])
def test_anywhere_else_is_refused(at: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="once the run is terminal"):
        schema.Action(do="reuse_key", at=at)


def test_the_incident_scenario_purges_then_reuses_the_key() -> None:
    scenario = schema.find("dbos_py_769_reused_key_replays_purged_run")
    assert [action.do for action in scenario.actions] == ["purge", "reuse_key"]
    assert scenario.faults == ["kill@run.purged#1"]
