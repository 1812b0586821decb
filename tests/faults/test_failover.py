"""`pg_failover`: the trial's streaming standby promoted at a point, every link repointed.

Synchronous replication keeps every acknowledged commit, and the reference engine PASSes.
Asynchronous replication loses the commits acknowledged after WAL shipping paused: the
trial records which, and the verdict follows CONTRACT.md section 7 ("Lost acknowledged
commits"): no FAIL that may rest on them, the strict invariants judged as always. After
each trial the lab's primary is back and takes the next trial.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from harness.checkers import failover, verdict
from harness.engines import commands
from harness.lab import shared
from harness.record import history
from harness.scenario import schema
from harness.trial import runner

pytestmark = [pytest.mark.matrix, pytest.mark.postgres, pytest.mark.toxiproxy]

V = verdict.Verdict


@pytest.fixture(scope="module")
def lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference"), require_toxiproxy=True) as opened:
        yield opened


def run(lab: shared.Lab, out: pathlib.Path, fault: str) -> runner.TrialOutcome:
    spec = runner.TrialSpec.under(schema.find("refund"), [fault], scenario_ref="refund")
    return runner.run_trial(lab, spec, out_dir=out)


def promotion(outcome: runner.TrialOutcome) -> history.FaultApplied:
    (record,) = [event for event in outcome.history.faults() if event.action == "pg_failover"]
    assert record.ok, record.note
    return record


def explain(outcome: runner.TrialOutcome) -> str:
    lines = [f"{r.invariant} {r.verdict.value}: {r.summary}" for r in outcome.failing]
    return "\n".join([*lines, f"rerun: {outcome.repro}"])


@pytest.mark.parametrize("point", ["tools.pending#1", "tool.settled#2", "reply.ready#1"])
def test_the_reference_engine_passes_a_synchronous_failover(
    lab: shared.Lab, tmp_path: pathlib.Path, point: str
) -> None:
    outcome = run(lab, tmp_path, f"pg_failover@{point}?sync=1")
    assert outcome.verdict is V.PASS, explain(outcome)
    record = promotion(outcome)
    assert record.observed["sync"] is True
    assert record.observed["lost"] == []


def test_an_asynchronous_failover_records_the_lost_decision_and_excuses_its_repeat(
    lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    """The decision of turn 0 is acknowledged while WAL shipping is paused, then lost. Two
    correct recoveries race, and the test holds each to what it must show:
    - the other worker takes the run first (the promoted database holds no session lock),
      finds the model call open and rightly asks the model again: a repeat whose FAILs are
      excused, INCONCLUSIVE and naming the lost commit;
    - the worker that lost the commit gets back first, still holding the answer it had, and
      commits the decision again without asking: one request, and nothing to excuse.
    Which one wins is timing (a faster promotion favours the second); neither is a bug."""
    outcome = run(lab, tmp_path, "pg_failover@tools.pending#1?sync=0")
    record = promotion(outcome)
    assert record.observed["behind"] is True, record.note
    assert record.observed["lost"] == ["tools.pending#1"]
    assert failover.lost(outcome.history) == ["tools.pending#1"]
    assert outcome.verdict is not V.FAIL, explain(outcome)
    judged = {result.invariant: result for result in outcome.results}
    for invariant in failover.STRICT:
        assert judged[invariant].verdict is V.PASS, explain(outcome)
    for result in outcome.failing:
        assert result.verdict is V.INCONCLUSIVE, explain(outcome)
        assert "tools.pending#1" in result.summary
    asked = [request for request in outcome.history.model if request.turn == 0]
    decided = [hit for hit in outcome.history.boundary_hits() if hit.point == "tools.pending"]
    if len(asked) == 2:  # asked again: the repeat is there, and excused
        assert judged["model.once_after_decision"].verdict is V.INCONCLUSIVE, explain(outcome)
    else:  # the holder committed its answer again, by the same worker, without asking
        assert len(asked) == 1, explain(outcome)
        assert outcome.verdict is V.PASS, explain(outcome)
        lost, again = decided[0], decided[1]
        assert (lost.occurrence, again.occurrence) == (1, 2)
        assert again.worker_id == lost.worker_id
        assert not [r for r in outcome.history.model if lost.seq < r.seq < again.seq]


def test_an_asynchronous_failover_after_the_refund_keeps_it_single(
    lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    """The refund's outcome is lost; its start is not, so the engine asks the payment
    service by key and never refunds twice."""
    outcome = run(lab, tmp_path, "pg_failover@tool.settled#2?sync=0")
    record = promotion(outcome)
    assert record.observed["lost"] == ["tool.settled#2"], record.note
    assert outcome.verdict is V.PASS, explain(outcome)
    effects = [entry for entry in outcome.history.tools if entry.kind == "tool.effect"]
    assert [entry.tool for entry in effects].count("refund_order") == 1
