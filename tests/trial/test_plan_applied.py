"""plan.applied: every planned step has a fault record of its own, matched as a step.

Read from the structured record; a history written before it (labels alone) is judged
the same.
"""

from __future__ import annotations

from harness.checkers import judge, verdict
from harness.faults import spec
from harness.record import history
from tests.checkers import builders

V = verdict.Verdict
CUT = spec.parse("db_cut@tools.pending#1?heal_at=tool.settled#1")
KILL = spec.parse("kill@run.claimed#2?same_worker_id=true")


def planned(*records: history.FaultApplied) -> history.TrialHistory:
    trial = builders.clean()
    return trial.model_copy(update={"plan": [CUT, KILL], "events": [*trial.events, *records]})


def record(step: spec.FaultStep, *, ok: bool = True, note: str = "") -> history.FaultApplied:
    struck = spec.PointRef(point=step.point, occurrence=step.occurrence)
    return history.FaultApplied(
        seq=100, action=step.action, planned=step, struck_at=struck, ok=ok, note=note
    )


def applied(trial: history.TrialHistory) -> verdict.CheckResult:
    (result,) = [r for r in judge.judge(trial)[0] if r.invariant == "plan.applied"]
    return result


def test_every_step_applied_passes() -> None:
    result = applied(planned(record(CUT), record(KILL)))
    assert result.verdict is V.PASS and result.summary == "2 planned fault(s) applied"


def test_a_step_never_applied_is_inconclusive_and_named() -> None:
    result = applied(planned(record(CUT), record(KILL, ok=False, note="no worker of ours")))
    assert result.verdict is V.INCONCLUSIVE
    assert result.summary == (
        "planned fault(s) never applied: kill@run.claimed#2?same_worker_id=true"
    )
    assert result.evidence[0] == "kill@run.claimed#2?same_worker_id=true: no worker of ours"


def test_the_same_point_under_other_params_is_another_step() -> None:
    other = KILL.model_copy(update={"params": {}})
    result = applied(planned(record(CUT), record(other)))
    assert result.verdict is V.INCONCLUSIVE


def test_labels_alone_are_judged_the_same() -> None:
    for records in ([record(CUT), record(KILL)], [record(CUT)]):
        structured = planned(*records)
        old = builders.label_only(structured)
        assert [f.planned for f in old.faults()] == [f.planned for f in structured.faults()]
        assert applied(old) == applied(structured)
