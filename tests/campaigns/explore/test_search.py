"""The exploration search on a fake engine: no Postgres, no processes, only the logic.

A fake `run` plays an engine whose bug is a kill at one point: generation must find it,
shrinking must cut it down to that one step, and the seed must decide the schedules.
"""

from __future__ import annotations

import pathlib

import pytest

from harness import errors
from harness.campaigns import explore
from harness.checkers import verdict as verdict_module
from harness.faults import spec
from harness.scenario import schema

TRACE = [
    ("run.claimed", 1),
    ("model.pending:before_commit", 1),
    ("model.pending", 1),
    ("tools.pending:before_commit", 1),
    ("tools.pending", 1),
    ("tool.started:before_commit", 1),
    ("tool.started", 1),
    ("tool.returned", 1),
    ("model.pending:before_commit", 2),
    ("model.pending", 2),
    ("reply.sending:before_commit", 1),
    ("reply.sending", 1),
    ("reply.sent", 1),
    ("run.finished:before_commit", 1),
    ("run.finished", 1),
]
PASS = explore.Observation(verdict=verdict_module.Verdict.PASS, failing=())
FAIL = explore.Observation(verdict=verdict_module.Verdict.FAIL, failing=("tool.at_most_once",))


class FakeEngine:
    """Fails whenever the schedule kills at `bug`; records every schedule it ran."""

    def __init__(self, bug: str = "tool.returned#1") -> None:
        self.bug = bug
        self.ran: list[tuple[str, list[str]]] = []

    def __call__(self, schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        labels = [step.label() for step in schedule]
        self.ran.append((purpose, labels))
        return FAIL if f"kill@{self.bug}" in labels else PASS


def space() -> explore.Space:
    return explore.candidates(TRACE)


def test_candidates_add_the_next_occurrence_of_each_point() -> None:
    points = space()
    assert list(points.reached) == [*TRACE, explore.RUN]  # the run: per-run faults
    assert ("run.claimed", 2) in points.beyond and ("model.pending", 3) in points.beyond
    assert ("tools.pending", 2) in points.beyond
    assert len(points.all()) == len(set(points.all()))


def test_candidates_keep_only_chosen_boundaries() -> None:
    points = explore.candidates(TRACE, points=["tools.pending"])
    assert points.all() == [
        ("tools.pending:before_commit", 1),
        ("tools.pending", 1),
        ("tools.pending:before_commit", 2),
        ("tools.pending", 2),
    ]


def test_commit_faults_only_before_commit_and_no_lease_fault_after_finish() -> None:
    assert spec.applies_at("commit_lost", "tools.pending:before_commit")
    assert not spec.applies_at("commit_lost", "tools.pending")
    assert not spec.applies_at("pause", "run.finished")
    assert spec.applies_at("kill", "run.finished")
    assert spec.applies_at("db_cut", "reply.sent")


def test_generated_steps_respect_the_rules() -> None:
    seen: list[list[spec.FaultStep]] = []

    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        seen.append(schedule)
        return PASS

    explore.search(
        run, space(), faults=["kill", "pause", "commit_lost"], examples=40, seed=3, max_faults=3
    )
    assert len(seen) >= 20
    reachable, reached = set(space().all()), set(space().reached)
    for schedule in seen:
        assert 1 <= len(schedule) <= 3
        # Recovery-only hits need an earlier fault that the baseline reaches.
        assert any((s.point, s.occurrence) in reached for s in schedule)
        assert len({(s.point, s.occurrence) for s in schedule}) == len(schedule)
        for step in schedule:
            assert (step.point, step.occurrence) in reachable
            assert spec.applies_at(step.action, step.point), step.label()
    actions = {step.action for schedule in seen for step in schedule}
    assert actions == {"kill", "pause", "commit_lost"}


def test_a_failure_is_shrunk_to_the_one_step_that_matters() -> None:
    engine = FakeEngine()
    result, _ = explore.search(
        engine, space(), faults=["kill", "pause"], examples=200, seed=7, shrink_budget=50
    )
    assert result.failure is not None
    assert result.failure.labels == ["kill@tool.returned#1"]
    assert result.failure.invariants == ("tool.at_most_once",)
    assert result.failure.status is explore.Status.REPRODUCIBLE
    assert result.exit_code == 1
    assert [purpose for purpose, _ in engine.ran[-2:]] == ["replay", "replay"]
    assert result.trials == len(engine.ran)


def test_the_shrink_budget_bounds_the_trials() -> None:
    engine = FakeEngine()
    result, _ = explore.search(
        engine, space(), faults=["kill", "pause"], examples=200, seed=7, shrink_budget=2
    )
    assert result.shrinks <= 2
    assert result.failure is not None and "kill@tool.returned#1" in result.failure.labels


def test_same_seed_same_schedules_other_seed_others() -> None:
    def schedules(seed: int) -> list[list[str]]:
        _, condition = explore.search(
            lambda schedule, purpose: PASS, space(), examples=15, seed=seed
        )
        return condition.generated

    assert schedules(11) == schedules(11)
    assert schedules(11) != schedules(12)


def test_a_failure_that_does_not_replay_is_flaky() -> None:
    # Fails while searching, never again on replay.
    result, _ = explore.search(
        _flaky_once(FakeEngine()), space(), examples=200, seed=7, shrink_budget=20
    )
    assert result.failure is not None
    assert result.failure.status is explore.Status.FLAKY
    assert result.exit_code == 2
    assert not any(o.failed for o in result.failure.replays)


def _flaky_once(engine: FakeEngine) -> explore.RunSchedule:
    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        observed = engine(schedule, purpose)
        return PASS if purpose == "replay" else observed

    return run


def test_no_failure_exits_zero_errors_exit_three() -> None:
    result, _ = explore.search(lambda schedule, purpose: PASS, space(), examples=5, seed=1)
    assert result.failure is None and result.exit_code == 0
    assert result.examples == 5
    error = explore.Observation(verdict=verdict_module.Verdict.ERROR, failing=())
    broken, _ = explore.search(lambda schedule, purpose: error, space(), examples=3, seed=1)
    assert broken.exit_code == 3


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(errors.CrashcertError, match="unknown fault classes"):
        explore.search(lambda s, p: PASS, space(), faults=["explode"], examples=1, seed=0)
    with pytest.raises(errors.CrashcertError, match="nothing to explore"):
        explore.search(
            lambda s, p: PASS,
            explore.Space(reached=(("tools.pending", 1),)),
            faults=["commit_lost"],
            examples=1,
            seed=0,
        )


def test_schedule_file_is_a_runnable_scenario(tmp_path: pathlib.Path) -> None:
    refund = schema.find("refund")
    steps = [spec.FaultStep(action="pause", point="reply.sending", occurrence=1)]
    path = explore.write_schedule(tmp_path, refund, steps, status=explore.Status.REPRODUCIBLE)
    loaded = schema.load(path)
    assert loaded.faults == ["pause@reply.sending#1"]
    assert loaded.turns == refund.turns


LIVENESS = explore.Observation(verdict=verdict_module.Verdict.FAIL, failing=("run.liveness",))


def _masked(*, alone: explore.Observation, crowded: explore.Observation) -> explore.RunSchedule:
    """The bug is a kill at tool.returned#1; how it shows depends on the company it keeps."""

    def run(schedule: list[spec.FaultStep], purpose: str) -> explore.Observation:
        if "kill@tool.returned#1" not in [step.label() for step in schedule]:
            return PASS
        return alone if len(schedule) == 1 else crowded

    return run


def _found_crowded(run: explore.RunSchedule) -> explore.ExploreResult:
    """The first seed whose search first meets the bug in company (several faults)."""
    for seed in range(100):
        result, condition = explore.search(run, space(), examples=300, seed=seed, shrink_budget=50)
        if condition.found is not None and len(condition.found) >= 2:
            return result
    raise AssertionError("no seed met the bug in company")


def test_a_liveness_failure_may_shrink_into_a_safety_failure() -> None:
    result = _found_crowded(_masked(alone=FAIL, crowded=LIVENESS))  # found as a hang
    assert result.failure is not None
    assert result.failure.labels == ["kill@tool.returned#1"]
    assert result.failure.invariants == ("tool.at_most_once",)
    assert result.failure.status is explore.Status.REPRODUCIBLE


def test_a_safety_failure_never_shrinks_into_a_liveness_failure() -> None:
    result = _found_crowded(_masked(alone=LIVENESS, crowded=FAIL))
    assert result.failure is not None
    assert len(result.failure.labels) == 2 and "kill@tool.returned#1" in result.failure.labels
    assert result.failure.invariants == ("tool.at_most_once",)
