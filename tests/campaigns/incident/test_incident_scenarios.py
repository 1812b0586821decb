"""The bundled incident classes, and fault params in the fault syntax (same_worker_id)."""

from __future__ import annotations

import pytest

from harness.faults import spec
from harness.record import history
from harness.scenario import schema

INCIDENTS = sorted(schema.bundled_dir().glob("incident_*.yaml"))


def test_five_incident_classes_are_bundled() -> None:
    assert len(INCIDENTS) == 5


@pytest.mark.parametrize("path", INCIDENTS, ids=lambda path: path.stem)
def test_each_names_its_class_and_sets_faults(path) -> None:
    loaded = schema.load(path)
    assert loaded.note.startswith("Public incident class:")
    assert loaded.faults
    assert [spec.parse(text).label() for text in loaded.faults] == loaded.faults


def test_fault_params_round_trip_through_the_label() -> None:
    step = spec.parse("latency@tool.started#1?latency_ms=50&heal_after_s=2.5")
    assert step.params == {"latency_ms": 50, "heal_after_s": 2.5}
    assert step.label() == "latency@tool.started#1?heal_after_s=2.5&latency_ms=50"
    assert spec.parse(step.label()) == step
    assert spec.parse("kill@tool.started").label() == "kill@tool.started#1"
    # A fault record carrying only the label reads as the structured step and its hit.
    record = history.FaultApplied(action="latency", step=step.label())
    assert record.planned == step
    assert record.struck_at == spec.PointRef(point="tool.started", occurrence=1)


def test_bad_params_are_refused() -> None:
    with pytest.raises(Exception, match="NAME=VALUE"):
        spec.parse("kill@tool.started#1?same_worker_id")
