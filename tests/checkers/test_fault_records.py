"""Fault records carry their step and the hit they struck at; the checkers read those.

A history written before the structured fields existed (each fault with its step label
alone) is read once into the same fields, so every checker judges it the same.
"""

from __future__ import annotations

import pytest

from harness import checkers
from harness.checkers import blackbox, facts, judge, verdict
from harness.contract import boundaries
from harness.faults import spec
from harness.record import history
from tests.checkers import builders

V = verdict.Verdict
# A fault line of a history.jsonl written before the structured fields existed.
OLD_LINE = (
    '{"kind":"fault","seq":5,"t":1.5,"action":"db_cut",'
    '"step":"db_cut@tools.pending#1?heal_at=tool.settled#1","worker_id":"w-1","pid":100,'
    '"ok":true,"note":"proxy cc-w-1","observed":{}}'
)


def judged(trial: history.TrialHistory) -> list[dict[str, object]]:
    """Every invariant's result and the trial's verdict, as the runner and analyze judge."""
    results, overall = judge.judge(trial)
    return [*(result.model_dump() for result in results), {"trial": overall.value}]


# --- the record ----------------------------------------------------------------------------


def test_an_old_line_reads_as_the_structured_step_and_the_hit_it_names() -> None:
    fault = history.FaultApplied.model_validate_json(OLD_LINE)
    assert fault.planned == spec.parse("db_cut@tools.pending#1?heal_at=tool.settled#1")
    assert fault.struck_at == spec.PointRef(point="tools.pending", occurrence=1)
    assert fault.step == "db_cut@tools.pending#1?heal_at=tool.settled#1"  # kept as written


def test_the_structured_step_writes_the_label_and_survives_json() -> None:
    step = spec.parse("kill@time:+0.35s")
    struck = spec.PointRef(point="time:+0.35s", occurrence=1)
    fault = history.FaultApplied(action="kill", planned=step, struck_at=struck)
    assert fault.step == "kill@time:+0.35s#1"
    again = history.FaultApplied.model_validate_json(fault.model_dump_json())
    assert again == fault and again.planned == step and again.struck_at == struck


def test_records_without_a_fault_label_have_no_step() -> None:
    assert history.FaultApplied(action="resume").planned is None
    garbled = history.FaultApplied(action="kill", step="kill at tool.started")
    assert garbled.planned is None and garbled.struck_at is None


def test_a_label_recorded_under_an_older_rule_still_reads() -> None:
    # Planning refuses a lost COMMIT where none is in flight; a record of one still loads.
    with pytest.raises(Exception, match="needs a :before_commit point"):
        spec.parse("commit_lost@tool.returned#1")
    fault = history.FaultApplied(action="commit_lost", step="commit_lost@tool.returned#1")
    assert fault.struck_at == spec.PointRef(point="tool.returned", occurrence=1)


# --- boundary faults -----------------------------------------------------------------------


def killed_at_refund_returned() -> history.TrialHistory:
    """Killed after the refund's effect; the recovering worker runs the refund again."""
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.start_tool("call_refund")
    trial.tool_request("call_refund")
    builders.kill(trial, trial.hit("tool.returned", tool_call_id="call_refund"))
    trial.claim("w-2")
    trial.start_tool("call_refund")
    trial.tool_request("call_refund")
    trial.finish_tool("call_refund")
    trial.settle("call_refund", "succeeded", {"status": "ok"})
    trial.close_round()
    return builders.last_turn(trial).build()


def lost_ack_at_decision() -> history.TrialHistory:
    """The decision's COMMIT landed, its acknowledgement was lost; another worker goes on."""
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    before = trial.hit("tools.pending:before_commit", turn=None, frontier_version=trial.version + 1)
    lost = trial.fault("commit_lost", before, observed={"xids": [742]})
    trial.heal(lost, observed={"transaction": "committed", "xids": [742]})
    trial.version += 1
    trial.phase = "tools_pending"
    trial.claim("w-2")
    trial.model_turn(1)
    return trial.build()


def paused_and_taken_over() -> history.TrialHistory:
    trial = builders.first_round(builders.Trial())
    trial.fault("pause", trial.model_turn(1))
    trial.claim("w-2")
    trial.run_tool("call_refund")
    trial.fault("resume", worker="w-1")
    trial.close_round()
    return builders.last_turn(trial).build()


def test_a_kill_is_found_where_its_record_says_it_struck() -> None:
    trial = killed_at_refund_returned()
    (item,) = facts.interruptions(trial)
    # The lookup returned first: the refund's is the second tool.returned of the trial.
    assert item.hit is not None and (item.hit.point, item.hit.occurrence) == ("tool.returned", 2)
    assert [i.fault.seq for i in facts.struck_in(trial, frozenset({"tool.returned"}))] == [
        item.fault.seq
    ]
    results = {r.invariant: r for r in judge.judge(trial)[0]}
    assert results["tool.at_most_once"].verdict is V.FAIL
    assert "interrupted by kill at tool.returned#2 worker w-1" in (
        results["tool.unknown_outcome"].summary
    )


def test_a_lost_ack_is_matched_to_its_heal_by_step_and_hit() -> None:
    trial = lost_ack_at_decision()
    (lost,) = facts.lost_acks(trial)
    assert lost.hit.point == "tools.pending:before_commit"
    assert lost.heal.observed["transaction"] == "committed"
    # A heal of the same step struck elsewhere is another fault's heal.
    moved = spec.PointRef(point=lost.hit.point, occurrence=lost.hit.occurrence + 1)
    events = [
        e.model_copy(update={"struck_at": moved}) if getattr(e, "action", "") == "heal" else e
        for e in trial.events
    ]
    assert facts.lost_acks(trial.model_copy(update={"events": events})) == []


@pytest.mark.parametrize(
    "build", [killed_at_refund_returned, lost_ack_at_decision, paused_and_taken_over]
)
def test_a_history_with_labels_alone_is_judged_the_same(build) -> None:
    structured = build()
    old = builders.label_only(structured)
    assert all(f.planned is not None for f in old.faults() if f.step)
    assert judged(old) == judged(structured)


# --- black-box faults ----------------------------------------------------------------------


# A world hit of a history.jsonl written before hits carried what they stand for.
OLD_WORLD_LINE = (
    '{"kind":"boundary","seq":9,"t":2.5,"point":"world:tool.effect","occurrence":2,'
    '"run_id":null,"worker_id":"w-1","pid":100,"detail":{"tool":"refund_order"}}'
)


def test_a_world_fault_is_read_where_it_struck_as_recorded() -> None:
    trial = builders.black_box_refund_twice(at="world")
    (fault,) = trial.faults()
    assert fault.planned == spec.parse("kill@world:tool.effect#2")
    assert fault.step == "kill@world:tool.effect#2"
    assert fault.struck_at == spec.PointRef(point="world:tool.effect", occurrence=2)
    hit = facts.fault_hit(trial, fault)
    assert hit is not None and facts.hit_name(hit) == "world:tool.effect#2"
    assert hit.stands_for == "tool.returned" and facts.point(hit) == "tool.returned"
    # The plain helpers see it inside the tool window: no renamed copy of the history.
    (item,) = facts.struck_in(trial, boundaries.TOOL_WINDOW)
    assert item.fault == fault and item.hit == hit


def test_a_world_fault_with_params_is_read_where_it_struck_too() -> None:
    # The label's params once hid such a fault from translation; where it struck does not.
    step = spec.parse("db_cut@world:tool.effect#2?heal_after_s=2")

    def with_params(event: history.Event) -> history.Event:
        if not isinstance(event, history.FaultApplied):
            return event
        return event.model_copy(update={"planned": step, "step": step.label()})

    trial = builders.black_box_refund_twice(at="world", action="db_cut")
    trial = trial.model_copy(update={"events": [with_params(e) for e in trial.events]})
    (item,) = facts.struck_in(trial, boundaries.TOOL_WINDOW)
    assert item.fault.step == "db_cut@world:tool.effect#2?heal_after_s=2"
    assert item.hit is not None and facts.point(item.hit) == "tool.returned"


def test_the_plain_checkers_judge_a_world_hit_as_the_boundary_it_stands_for() -> None:
    # check_all, not the black-box reading: the recorded hit alone says it is tool.returned.
    results = {
        r.invariant: r for r in checkers.check_all(builders.black_box_refund_twice(at="world"))
    }
    unknown = results["tool.unknown_outcome"]
    assert unknown.verdict is V.FAIL, unknown
    assert "interrupted by kill at world:tool.effect#2 worker w-1" in unknown.summary


def test_a_time_hit_marks_no_boundary() -> None:
    trial = builders.black_box_refund_twice(at="time")
    (fault,) = trial.faults()
    (hit,) = trial.boundary_hits()
    assert hit.point == "time:+1.00s" and hit.stands_for is None
    assert facts.run_hits(trial) == [] and facts.fault_hit(trial, fault) is None
    (item,) = facts.interruptions(trial)
    assert item.hit is None  # struck, but at no place in the engine's work


def test_an_old_world_hit_reads_with_what_it_stands_for_and_is_judged_the_same() -> None:
    old = history.BoundaryHit.model_validate_json(OLD_WORLD_LINE)
    assert old.stands_for == "tool.returned"
    trial = builders.black_box_refund_twice(at="world")
    written = [
        e.model_dump(exclude={"stands_for"}) if isinstance(e, history.BoundaryHit) else e
        for e in trial.events
    ]
    again = trial.model_copy(
        update={
            "events": [
                history.BoundaryHit.model_validate(e) if isinstance(e, dict) else e for e in written
            ]
        }
    )
    assert judged(again) == judged(trial)


def test_an_engine_hit_is_written_without_stands_for() -> None:
    hit = history.BoundaryHit(
        point="tool.returned", occurrence=1, run_id=None, worker_id=None, pid=None
    )
    assert "stands_for" not in hit.model_dump(mode="json")
    world = history.BoundaryHit(
        point="world:reply.accepted", occurrence=1, run_id=None, worker_id=None, pid=None
    )
    assert world.model_dump(mode="json")["stands_for"] == "reply.sent"


def test_a_time_kill_is_told_by_its_structured_step() -> None:
    results = {r.invariant: r for r in blackbox.judge(builders.black_box_refund_twice(at="time"))}
    unknown = results["tool.unknown_outcome"]
    assert unknown.verdict is V.INCONCLUSIVE and "time kill" in unknown.summary
    assert results["tool.at_most_once"].verdict is V.FAIL


@pytest.mark.parametrize("at", ["world", "time"])
def test_a_black_box_history_with_labels_alone_is_judged_the_same(at: str) -> None:
    structured = builders.black_box_refund_twice(at=at)
    assert judged(builders.label_only(structured)) == judged(structured)
