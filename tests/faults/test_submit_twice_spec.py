"""submit_twice@run: a per-run fault, its grammar and how the matrix plans it."""

from __future__ import annotations

import pytest

from harness import errors
from harness.faults import spec
from harness.planning import plan

TRACE = [("run.claimed", 1), ("model.pending", 1), ("run.finished", 1)]


def test_it_strikes_the_run_with_a_when() -> None:
    step = spec.parse("submit_twice@run?when=after_finish")
    assert (step.action, step.point, step.params) == (
        "submit_twice",
        "run",
        {"when": "after_finish"},
    )
    assert spec.applies_at("submit_twice", spec.RUN_POINT)
    assert not any(spec.applies_at("submit_twice", point) for point, _ in TRACE)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("submit_twice@tools.pending#1", "strikes the run as a whole"),
        ("kill@run", "only submit_twice strike(s) @run"),
        ("submit_twice@run?when=later", "expected one of at_once, after_finish"),
    ],
)
def test_it_refuses_what_makes_no_sense(text: str, says: str) -> None:
    with pytest.raises(errors.CrashcertError, match=None) as raised:
        spec.parse(text)
    assert says in str(raised.value)


def test_the_matrix_plans_one_trial_per_when_not_per_point() -> None:
    plans = plan.fault_plans(TRACE, ["submit_twice"])
    assert [plan.plan_label(steps) for steps in plans] == [
        "submit_twice@run#1?when=at_once",
        "submit_twice@run#1?when=after_finish",
    ]
    assert len(plan.fault_plans(TRACE, ["kill", "submit_twice"])) == len(TRACE) + 2
