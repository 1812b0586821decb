"""Fault records carry their step and the hit they struck at; the checkers read those.

A history written before the structured fields existed (each fault with its step label
alone) is read once into the same fields, so every checker judges it the same.
"""

from __future__ import annotations

import pytest

from harness.checkers import blackbox, facts, judge, verdict
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


def test_translation_moves_where_a_world_fault_struck_and_keeps_its_step() -> None:
    trial = builders.black_box_refund_twice(at="world")
    (fault,) = blackbox.translated(trial).faults()
    assert fault.planned == spec.parse("kill@world:tool.effect#2")
    assert fault.step == "kill@world:tool.effect#2"
    offset = blackbox.OCCURRENCE_OFFSET + 2
    assert fault.struck_at == spec.PointRef(point="tool.returned", occurrence=offset)
    hit = facts.fault_hit(blackbox.translated(trial), fault)
    assert hit is not None and hit.detail[facts.WORLD_POINT_DETAIL] == "world:tool.effect#2"


def test_a_world_fault_with_params_is_translated_too() -> None:
    # The label's params once hid such a fault from translation; where it struck does not.
    step = spec.parse("db_cut@world:tool.effect#2?heal_after_s=2")

    def with_params(event: history.Event) -> history.Event:
        if not isinstance(event, history.FaultApplied):
            return event
        return event.model_copy(update={"planned": step, "step": step.label()})

    trial = builders.black_box_refund_twice(at="world", action="db_cut")
    trial = trial.model_copy(update={"events": [with_params(e) for e in trial.events]})
    (fault,) = blackbox.translated(trial).faults()
    assert fault.step == "db_cut@world:tool.effect#2?heal_after_s=2"
    assert fault.struck_at is not None and fault.struck_at.point == "tool.returned"


def test_a_time_kill_is_told_by_its_structured_step() -> None:
    results = {r.invariant: r for r in blackbox.judge(builders.black_box_refund_twice(at="time"))}
    unknown = results["tool.unknown_outcome"]
    assert unknown.verdict is V.INCONCLUSIVE and "time kill" in unknown.summary
    assert results["tool.at_most_once"].verdict is V.FAIL


@pytest.mark.parametrize("at", ["world", "time"])
def test_a_black_box_history_with_labels_alone_is_judged_the_same(at: str) -> None:
    structured = builders.black_box_refund_twice(at=at)
    assert judged(builders.label_only(structured)) == judged(structured)
