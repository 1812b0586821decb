"""Fault plans: parsing, matrix expansion from a baseline trace, coverage."""

from __future__ import annotations

import pytest

from harness import errors
from harness.contract import boundaries
from harness.faults import spec
from harness.planning import plan


def test_parse_fault():
    step = spec.parse("kill@tool.started:before_commit#2")
    assert (step.action, step.point, step.occurrence) == ("kill", "tool.started:before_commit", 2)
    assert spec.parse("kill@run.claimed").occurrence == 1
    assert step.label() == "kill@tool.started:before_commit#2"


def test_a_heal_point_rides_on_the_step_and_its_label():
    text = "db_cut@tools.pending#1?heal_at=tool.settled:before_commit#2"
    step = spec.parse(text)
    assert step.params == {"heal_at": "tool.settled:before_commit#2"}
    assert step.label() == text
    assert spec.parse(step.label()) == step
    assert boundaries.parse_ref(step.params["heal_at"]) == ("tool.settled:before_commit", 2)
    assert boundaries.parse_ref("reply.ready") == ("reply.ready", 1)


@pytest.mark.parametrize(
    "text,problem",
    [
        ("kill", "expected ACTION@POINT"),
        ("kill@tools.pendng#1", "unknown point 'tools.pendng'"),
        ("explode@tools.pending#1", "bad fault"),
        ("kill@tools.pending#0", "bad fault"),
        ("kill@tools.pending#1?heal_at=tool.settled#1", "heal_at only applies to commit_dropped"),
        ("db_cut@tools.pending#1?heal_at=tool.setled#1", "heal_at=tool.setled#1 is not a known"),
        ("db_cut@tools.pending#1?heal_after_s=abc", "heal_after_s=abc: expected a number"),
        ("kill@tools.pending#1?bogus=1", "unknown param 'bogus'"),
        ("commit_lost@tool.returned#1", "and tool.returned has none"),
    ],
)
def test_parse_fault_rejects_bad_input_clearly(text, problem):
    with pytest.raises(errors.CrashcertError, match=problem):
        spec.parse(text)


TRACE = [
    ("run.claimed", 1),
    ("model.pending:before_commit", 1),
    ("model.pending", 1),
    ("model.returned", 1),
    ("reply.ready:before_commit", 1),
    ("reply.ready", 1),
    ("run.finished", 1),
]


def test_one_kill_per_point_and_occurrence():
    plans = plan.kill_plans(TRACE)
    assert [[s.label() for s in p] for p in plans] == [[f"kill@{p}#{n}"] for p, n in TRACE]


def test_second_kill_strikes_the_recovering_worker_after_its_claim():
    plans = plan.kill_plans(TRACE, second_kill=True)
    doubles = [p for p in plans if len(p) == 2]
    assert [p[1].label() for p in doubles][:3] == [
        "kill@run.claimed#2",
        "kill@run.claimed#2",
        "kill@run.claimed#2",
    ]
    assert not any(p[0].point == "run.finished" for p in doubles)


def test_unreached_points_are_named():
    missing = plan.unreached(tuple(boundaries.all_points()), [TRACE])
    assert "tools.pending" in missing and "run.claimed" not in missing
