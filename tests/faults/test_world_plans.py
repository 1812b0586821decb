"""Faults of the world's response (response_lost, stream_cut) planned from a baseline's
world ledgers, also for an engine that reports boundaries (no world trigger ran)."""

from __future__ import annotations

from harness.planning import plan
from tests.checkers import builders

ANSWERED, EFFECT, ACCEPTED = "world:model.answered", "world:tool.effect", "world:reply.accepted"


def test_the_world_trace_counts_as_the_trigger_does() -> None:
    trial = builders.clean_trial()
    trial.model_request(1, status=500)  # a refused request is no answer
    world = plan.world_trace(trial.build())
    assert world.points[:5] == [
        (ANSWERED, 1),
        (EFFECT, 1),
        (ANSWERED, 2),
        (EFFECT, 2),
        (ANSWERED, 3),
    ]
    assert (ACCEPTED, 1) in world.points
    assert [p for p in world.points if p[0] == ANSWERED] == [(ANSWERED, n) for n in (1, 2, 3)]
    assert world.streamed == frozenset()


def test_response_lost_strikes_every_world_point_of_a_boundary_engine() -> None:
    history = builders.clean()
    trace = plan.baseline_trace(history)
    assert not any(point.startswith("world:") for point, _ in trace)
    world = plan.world_trace(history)
    plans = plan.fault_plans(trace, ["response_lost"], world=world)
    assert [plan.plan_label(steps) for steps in plans] == [
        f"response_lost@{point}#{occurrence}" for point, occurrence in world.points
    ]


def test_stream_cut_strikes_only_streamed_answers() -> None:
    trial = builders.clean_trial()
    trial.model[1] = trial.model[1].model_copy(update={"stream": True})
    world = plan.world_trace(trial.build())
    assert world.streamed == {2}
    plans = plan.fault_plans([], ["stream_cut"], world=world)
    assert [plan.plan_label(steps) for steps in plans] == ["stream_cut@world:model.answered#2"]


def test_an_engine_that_never_streams_gets_one_stream_cut_to_show_it() -> None:
    world = plan.world_trace(builders.clean())
    plans = plan.fault_plans([], ["stream_cut"], world=world)
    assert [plan.plan_label(steps) for steps in plans] == ["stream_cut@world:model.answered#1"]
