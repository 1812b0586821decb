"""Exploration plans every fault class the matrix plans: world points, per-run and link
classes, on a fake engine (no Postgres, no processes), and shrinks schedules holding them."""

from __future__ import annotations

import pytest

from harness import errors
from harness.campaigns import explore
from harness.checkers import verdict as verdict_module
from harness.faults import spec
from harness.planning import plan
from tests.campaigns.explore import test_search

TRACE = test_search.TRACE
# The refund scenario's world: three model answers (the second streamed), two effects, one
# delivery, as plan.world_trace reads them from a baseline's ledgers.
WORLD = plan.WorldTrace(
    points=[
        ("world:model.answered", 1),
        ("world:tool.effect", 1),
        ("world:model.answered", 2),
        ("world:tool.effect", 2),
        ("world:model.answered", 3),
        ("world:reply.accepted", 1),
    ],
    streamed=frozenset({2}),
)
PASS = test_search.PASS


def space() -> explore.Space:
    return explore.candidates(TRACE, world=WORLD)


def failing_on(*bugs: str) -> explore.RunSchedule:
    """Fails (tool.same_key) when the schedule holds every one of `bugs`."""

    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        del purpose
        labels = {step.label() for step in schedule}
        if set(bugs) <= labels:
            return explore.Observation(
                verdict=verdict_module.Verdict.FAIL, failing=("tool.same_key",)
            )
        return PASS

    return run


def drawn(faults: list[str], *, examples: int = 60, seed: int = 5) -> list[spec.FaultStep]:
    seen: list[spec.FaultStep] = []

    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        del purpose
        seen.extend(schedule)
        return PASS

    explore.search(run, space(), faults=faults, examples=examples, seed=seed, max_faults=3)
    return seen


def test_the_space_holds_the_world_points_the_run_and_their_next_occurrences() -> None:
    points = space()
    assert list(points.reached) == [*TRACE, *WORLD.points, explore.RUN]
    assert ("world:tool.effect", 3) in points.beyond
    assert ("world:reply.accepted", 2) in points.beyond
    assert len(points.all()) == len(set(points.all()))


def test_without_the_world_points_a_world_fault_has_nowhere_to_strike() -> None:
    """What explore did before: boundary hits only."""
    with pytest.raises(errors.CrashcertError, match="no baseline point admits"):
        explore.schedules(explore.candidates(TRACE), ["response_lost"], max_faults=1)


def test_response_lost_strikes_only_world_points() -> None:
    steps = drawn(["response_lost"])
    assert {(step.point, step.occurrence) for step in steps} <= set(space().all())
    assert {step.point for step in steps} == set(spec.CATALOG["response_lost"].world_points)


def test_a_stream_is_cut_only_where_the_engine_streamed() -> None:
    steps = drawn(["stream_cut"])
    assert steps and {step.label() for step in steps} == {"stream_cut@world:model.answered#2"}


def test_submit_twice_is_drawn_once_per_value_of_its_choice() -> None:
    steps = drawn(["submit_twice"], examples=20)
    labels = {step.label() for step in steps if step.action == "submit_twice"}
    assert labels == {"submit_twice@run#1?when=at_once", "submit_twice@run#1?when=after_finish"}
    for label in labels:
        assert spec.parse(label).label() == label  # what a rerun line gives back


def test_a_link_cut_strikes_wherever_a_worker_holds_its_lease() -> None:
    """Boundaries and world points (the worker connected there is struck), never the finish."""
    points = {step.point for step in drawn(["tool_cut"], examples=120)}
    assert "tool.started" in points and "world:tool.effect" in points
    assert not points & {"run.finished", "run.finished:before_commit", spec.RUN_POINT}


@pytest.mark.parametrize(
    ("faults", "bugs"),
    [
        (["response_lost"], ["response_lost@world:tool.effect#2"]),
        (["kill", "tool_cut"], ["tool_cut@tool.started#1"]),
        (["submit_twice", "pause"], ["submit_twice@run#1?when=after_finish"]),
    ],
)
def test_a_failure_holding_these_classes_is_found_and_shrunk_to_them(
    faults: list[str], bugs: list[str]
) -> None:
    result, _ = explore.search(
        failing_on(*bugs),
        space(),
        faults=faults,
        examples=300,
        seed=11,
        max_faults=3,
        shrink_budget=60,
    )
    assert result.failure is not None, explore.render(result)
    assert sorted(result.failure.labels) == sorted(bugs), explore.render(result)
    assert result.failure.status is explore.Status.REPRODUCIBLE


def test_a_schedule_of_two_classes_shrinks_to_both() -> None:
    """A lost response and a kill of the worker that recovers from it: neither alone fails."""
    bugs = ["response_lost@world:tool.effect#1", "kill@run.claimed#2"]
    narrow = explore.candidates(TRACE, points=["run.claimed", "world:tool.effect"], world=WORLD)
    result, _ = explore.search(
        failing_on(*bugs),
        narrow,
        faults=["kill", "response_lost"],
        examples=300,
        seed=11,
        max_faults=3,
        shrink_budget=60,
    )
    assert result.failure is not None, explore.render(result)
    assert sorted(result.failure.labels) == sorted(bugs), explore.render(result)
    assert result.failure.status is explore.Status.REPRODUCIBLE


@pytest.mark.parametrize("seed", range(20))
def test_one_fault_over_six_world_points_is_exhausted_within_eight_examples(seed: int) -> None:
    """The premise of test_explore_engines' world-fault hunt: any seed reaches every point."""
    ran: list[str] = []

    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        del purpose
        ran.extend(step.label() for step in schedule)
        return PASS

    explore.search(run, space(), faults=["response_lost"], examples=8, seed=seed, max_faults=1)
    assert set(ran) == {f"response_lost@{point}#{n}" for point, n in WORLD.points}
