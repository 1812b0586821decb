"""Units of certification: levels, black-box points, judging a black-box history offline."""

from __future__ import annotations

import pathlib
import types
from typing import Any, cast

import pytest

from harness import errors
from harness.checkers import blackbox, facts, levels, verdict
from harness.contract import boundaries
from harness.engines import blackbox as blackbox_engine
from harness.faults import spec
from harness.planning import plan
from harness.record import history
from harness.trial import artifacts
from tests.checkers import builders

PASS, FAIL, INCONCLUSIVE = verdict.Verdict.PASS, verdict.Verdict.FAIL, verdict.Verdict.INCONCLUSIVE


def test_levels_nest_and_grant_the_highest_whose_invariants_all_held() -> None:
    full, crash_safe, at_least_once, _ = levels.LEVELS
    assert set(at_least_once.requires) < set(crash_safe.requires) < set(full.requires)
    assert levels.grant(set(full.requires)) is levels.Level.FULL
    assert levels.grant(set(crash_safe.requires)) is levels.Level.CRASH_SAFE
    assert levels.grant({"run.liveness", "tool.at_most_once"}) is levels.Level.NONE
    assert (
        levels.grant({"run.liveness", "tool.at_least_once", "tool.at_most_once"})
        is levels.Level.AT_LEAST_ONCE
    )
    assert levels.grant(set()) is levels.Level.NONE
    assert levels.rank(levels.Level.FULL) > levels.rank(levels.Level.CRASH_SAFE)
    assert levels.parse("crash_safe") is levels.Level.CRASH_SAFE


def test_badge_escapes_dashes_for_shields() -> None:
    assert levels.badge(levels.Level.CRASH_SAFE) == (
        "![crashcert](https://img.shields.io/badge/crashcert-CRASH--SAFE-yellow)"
    )


@pytest.mark.parametrize(
    "text",
    ["kill@world:tool.effect#1", "kill@world:model.answered#3", "kill@time:+0.35s"],
)
def test_black_box_points_parse_as_faults(text: str) -> None:
    step = spec.parse(text)
    assert boundaries.is_blackbox_point(step.point)
    assert spec.parse(step.label()) == step


def test_unknown_world_point_is_refused() -> None:
    with pytest.raises(errors.CrashcertError, match="black box"):
        spec.parse("kill@world:tool.exploded#1")


def test_world_tool_effect_kill_is_judged_as_tool_returned() -> None:
    results = {r.invariant: r for r in blackbox.judge(builders.black_box_refund_twice(at="world"))}
    assert results["tool.at_most_once"].verdict is FAIL
    assert results["tool.same_key"].verdict is FAIL
    unknown = results["tool.unknown_outcome"]
    assert unknown.verdict is FAIL, unknown
    # The world point that struck, never the synthetic occurrence of its boundary.
    assert "refund_order" in unknown.summary
    assert "interrupted by kill at world:tool.effect#2 worker w-1" in unknown.summary
    # Needs the engine's own boundaries: never a PASS by default in a black box.
    assert results["lease.fencing"].verdict is INCONCLUSIVE
    assert results["model.once_after_decision"].verdict is INCONCLUSIVE


def every_line(results: list[verdict.CheckResult]) -> list[str]:
    return [line for result in results for line in [result.summary, *result.evidence]]


def test_black_box_evidence_names_the_world_hit_as_recorded() -> None:
    lines = every_line(blackbox.judge(builders.black_box_refund_twice(at="world")))
    assert any("world:tool.effect#2" in line for line in lines)
    # Never a boundary occurrence the engine did not report.
    assert not [line for line in lines if "tool.returned#" in line]


def reply_lost_to_a_kill() -> history.TrialHistory:
    """A black box killed when the sink accepted its reply; the sink cannot be asked, so the
    recovered run ends delivery_uncertain without posting again."""
    trial = builders.Trial(builders.refund_scenario(sink_queryable=False))
    trial.model_request(0)
    trial.tool_request("call_lookup")
    trial.model_request(1)
    trial.tool_request("call_refund")
    trial.model_request(2)
    delivered = trial.delivery()
    hit = builders.world_hit(
        trial, "world:reply.accepted", 1, key=delivered.key, ledger_seq=delivered.seq
    )
    trial.fault("kill", at=hit, worker="w-1")
    trial.report("delivery_uncertain")
    trial.finished_at = trial.now
    return trial.build()


def test_reply_evidence_names_the_world_point() -> None:
    results = {r.invariant: r for r in blackbox.judge(reply_lost_to_a_kill())}
    reply = results["reply.single_delivery"]
    assert reply.verdict is PASS, reply
    assert "fault in the delivery window: kill at world:reply.accepted#1 worker w-1" in (
        builders.evidence(reply)
    )
    liveness = results["run.liveness"]
    assert liveness.verdict is PASS, liveness
    assert "(kill at world:reply.accepted#1 worker w-1" in builders.evidence(liveness)
    assert not [line for line in every_line(list(results.values())) if "reply.sent#" in line]


def reminder_struck(*, named: bool) -> history.TrialHistory:
    """Two scripted posts with equal arguments; the world kills at the first one's effect.
    `named`: the engine's report names each call's key."""
    trial = builders.Trial(builders.reminder_scenario())
    trial.model_request(0)
    trial.tool_request("call_remind")
    effect = trial.tools[-1]
    hit = builders.world_hit(
        trial, "world:tool.effect", 1, tool="post_message", key=effect.key, ledger_seq=effect.seq
    )
    trial.fault("kill", at=hit, worker="w-1")
    trial.model_request(1)
    trial.tool_request("call_nudge")
    trial.tool_states = {"call_remind": "outcome_unknown", "call_nudge": "succeeded"}
    trial.report("succeeded", **({} if named else {"tool_calls": []}))
    return trial.build()


def struck_call_id(trial: history.TrialHistory) -> object:
    hit = next(h for h in trial.boundary_hits() if h.point == "world:tool.effect")
    return facts.hit_call_id(trial, hit)


def test_a_world_effect_is_mapped_to_its_call_by_the_key_the_engine_names() -> None:
    # Arguments alone would say either post; the key says the first.
    assert struck_call_id(reminder_struck(named=True)) == "call_remind"


def test_equal_arguments_and_no_named_key_are_not_guessed() -> None:
    assert struck_call_id(reminder_struck(named=False)) is None


def test_a_black_box_trial_of_an_engine_with_boundaries_never_says_it_reports_none() -> None:
    # `--mode both`: the engine declares every boundary; this trial just did not collect them.
    trial = builders.black_box_refund_twice(at="world").model_copy(
        update={"declared_boundaries": boundaries.all_points()}
    )
    results = {r.invariant: r for r in blackbox.judge(trial)}
    fencing = results["lease.fencing"]
    assert fencing.verdict is INCONCLUSIVE
    assert fencing.summary == (
        "black box: the engine reports run.claimed, but this trial ran it as a black box (no "
        "control channel): handovers are invisible"
    )
    decisions = results["model.once_after_decision"]
    assert decisions.verdict is INCONCLUSIVE
    assert decisions.summary.startswith("black-box mode, the engine's own boundaries not collected")
    assert not [line for line in every_line(list(results.values())) if "reports no" in line]


def test_an_engine_run_as_a_black_box_keeps_its_declared_boundaries() -> None:
    engine = types.SimpleNamespace(name="e", boundaries=("run.claimed",), lease_ms=1000, preload=())
    wrapped = blackbox_engine.BlackBoxEngine(cast(Any, engine))
    assert wrapped.boundaries == ()  # no control channel in this trial
    assert blackbox_engine.declared_boundaries(wrapped) == ("run.claimed",)
    assert blackbox_engine.declared_boundaries(cast(Any, engine)) == ("run.claimed",)


def test_declared_boundaries_survive_the_trial_directory(tmp_path: pathlib.Path) -> None:
    # `crashcert analyze` must judge a stored trial in the same words as the live one.
    trial = builders.black_box_refund_twice(at="world").model_copy(
        update={"declared_boundaries": boundaries.all_points()}
    )
    artifacts.write_trial(tmp_path, trial, verdicts=[], verdict="FAIL", repro="crashcert run x")
    again = artifacts.read_history(tmp_path / "history.jsonl")
    assert again.declared_boundaries == boundaries.all_points()
    assert [r.summary for r in blackbox.judge(again)] == [r.summary for r in blackbox.judge(trial)]


def test_a_black_box_engine_is_said_to_report_no_claims() -> None:
    trial = builders.black_box_refund_twice(at="world").model_copy(
        update={"declared_boundaries": []}
    )
    fencing = next(r for r in blackbox.judge(trial) if r.invariant == "lease.fencing")
    assert fencing.summary == (
        "black box: the engine reports no run.claimed: handovers are invisible"
    )


def test_time_kill_leaves_unknown_outcome_unproven() -> None:
    results = {
        r.invariant: r
        for r in blackbox.judge(builders.black_box_refund_twice(at="time", worker=None))
    }
    assert results["tool.at_most_once"].verdict is FAIL
    assert results["tool.unknown_outcome"].verdict is INCONCLUSIVE
    assert "time kill" in results["tool.unknown_outcome"].summary


def test_time_plans_are_seeded_and_inside_the_baseline() -> None:
    trial = builders.Trial()
    for turn in range(3):
        trial.model_request(turn)
    trial.finished_at = trial.now + 2.0
    first = plan.time_plans(trial.build(), count=3, seed=7)
    assert first == plan.time_plans(trial.build(), count=3, seed=7)
    assert first != plan.time_plans(trial.build(), count=3, seed=8)
    for steps in first:
        seconds = boundaries.time_point_seconds(steps[0].point)
        assert seconds is not None and 0 < seconds < 2.3
