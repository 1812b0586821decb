"""Trials that once caught the reference engine (or the harness) out, kept as regressions.

Each was found by the fault matrix or by exploration; the engine must PASS them all.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema
from harness.trial import runner

pytestmark = [pytest.mark.matrix, pytest.mark.postgres, pytest.mark.toxiproxy]

CASES = [
    # a worker paused past its lease woke up and repeated its successor's refund / reply
    ("refund", ["pause@tool.started#2"]),
    ("refund", ["pause@reply.sending#1"]),
    # a lease check answered over a slow link was stale: the reply went out twice
    ("parallel_tools", ["latency@reply.sending#1"]),
    # the sink took the reply, the delivery was never recorded, the sink cannot be asked
    ("sink_no_query", ["kill@run.finished:before_commit#1"]),
    # the commit of the decision landed but its acknowledgement never came back
    ("refund", ["commit_lost@tools.pending:before_commit#2"]),
    # the terminal COMMIT landed unheard: re-read, never deliver again
    ("sink_no_query", ["commit_lost@run.finished:before_commit#1"]),
    # a COMMIT's answer crossed a slow link and came back after another worker took over
    # (the checkers once judged that commit by when its answer arrived)
    ("effect_then_fail", ["latency@tools.pending:before_commit#1"]),
    # Postgres restarted under a started refund (reports failed while it was down)
    ("refund", ["pg_restart@tool.started#2"]),
    # the last unpaused worker was paused: nobody could adopt the run
    ("email_send", ["kill@run.claimed#1", "pg_restart@reply.sending#1", "pause@reply.sent#1"]),
]


@pytest.fixture(scope="module")
def lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference")) as opened:
        yield opened


def run(lab: shared.Lab, out: pathlib.Path, name: str, faults: list[str]) -> runner.TrialOutcome:
    spec = runner.TrialSpec.under(schema.find(name), faults, scenario_ref=name)
    return runner.run_trial(lab, spec, out_dir=out)


@pytest.mark.parametrize("name,faults", CASES, ids=[f"{n}:{'+'.join(f)}" for n, f in CASES])
def test_reference_engine_passes(
    lab: shared.Lab, tmp_path: pathlib.Path, name: str, faults: list[str]
) -> None:
    outcome = run(lab, tmp_path, name, faults)
    assert outcome.verdict is verdict.Verdict.PASS, "\n".join(
        [f"{r.invariant} {r.verdict.value}: {r.summary}" for r in outcome.failing]
        + [f"rerun: {outcome.repro}"]
    )


@pytest.mark.parametrize(
    "action,fate", [("commit_lost", "committed"), ("commit_dropped", "aborted")]
)
def test_a_lost_commit_fault_strikes_the_commit_itself(
    lab: shared.Lab, tmp_path: pathlib.Path, action: str, fate: str
) -> None:
    """commit_lost: Postgres commits, the engine never hears it; commit_dropped: the COMMIT
    never arrives. The heal reads which by xid, and the engine survives both."""
    fault = f"{action}@tools.pending:before_commit#1"
    outcome = run(lab, tmp_path, "refund", [fault])
    heals = [
        event
        for event in outcome.history.faults()
        if event.action == "heal" and event.step == fault
    ]
    assert [heal.observed.get("transaction") for heal in heals] == [fate], outcome.repro
    assert len(heals[0].observed["xids"]) == 1
    assert outcome.verdict is verdict.Verdict.PASS, outcome.repro


def test_a_cut_heals_when_a_later_point_is_reported(
    lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    """`heal_at`: the database stays cut for the first worker until its successor has
    settled the lookup, then heals while that worker waits at the point."""
    outcome = run(lab, tmp_path, "refund", ["db_cut@tools.pending#1?heal_at=tool.settled#1"])
    events = outcome.history.events
    settled = next(
        event
        for event in outcome.history.boundary_hits()
        if (event.point, event.occurrence) == ("tool.settled", 1)
    )
    heal = next(event for event in outcome.history.faults() if event.action == "heal")
    # recorded while the worker that reported tool.settled#1 was still held there
    later = [e for e in events if e.seq > settled.seq and getattr(e, "worker_id", None)]
    assert heal.seq > settled.seq and later[0] is heal, outcome.repro
    assert outcome.verdict is verdict.Verdict.PASS, outcome.repro
