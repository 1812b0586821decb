"""Shards of an exploration on a fake engine: the same generated list on every shard, split
by schedule name; together (until a failure) they run what one unsharded search runs."""

from __future__ import annotations

from harness.campaigns import explore
from harness.planning import plan, shard
from tests.campaigns.explore import test_search

SEED, EXAMPLES = 7, 30
FAULTS = ("kill", "pause")


def _search(
    engine: test_search.FakeEngine, owner: shard.Shard | None, shrink_budget: int = 12
) -> explore.ExploreResult:
    def owns(schedule: list) -> bool:
        return owner is None or owner.owns("refund", plan.plan_label(schedule))

    result, _ = explore.search(
        engine,
        test_search.space(),
        faults=FAULTS,
        examples=EXAMPLES,
        seed=SEED,
        shrink_budget=shrink_budget,
        owns=None if owner is None else owns,
    )
    return result


def test_shards_together_run_the_unsharded_schedules_once_each() -> None:
    bugless = "nowhere#1"
    whole = test_search.FakeEngine(bug=bugless)
    _search(whole, None)
    runs = [test_search.FakeEngine(bug=bugless) for _ in range(3)]
    results = [_search(run, shard.Shard(i, 3)) for i, run in enumerate(runs, start=1)]
    ran = [labels for run in runs for _, labels in run.ran]
    assert sorted(ran) == sorted(labels for _, labels in whole.ran)
    assert all(result.examples >= 1 for result in results)  # it does split
    # a shard passes over what the others run
    assert [r.passed_over for r in results] == [
        sum(len(other.ran) for other in runs) - len(run.ran) for run in runs
    ]
    # the shared plan is the unsharded search's list, computed without a trial
    planned = explore.generated(test_search.space(), faults=FAULTS, examples=EXAMPLES, seed=SEED)
    assert planned == ["+".join(labels) for _, labels in whole.ran]


def test_a_shard_that_finds_the_bug_shrinks_it_alone() -> None:
    owners = [shard.Shard(i, 3) for i in range(1, 4)]
    found = []
    for owner in owners:
        engine = test_search.FakeEngine()
        result = _search(engine, owner, shrink_budget=50)
        if result.failure is not None:
            found.append(owner)
            assert "kill@tool.returned#1" in result.failure.labels
            assert len(result.failure.schedule) <= len(result.failure.found)
            assert result.failure.status is explore.Status.REPRODUCIBLE
            # shrinking ran schedules the shard does not own: it is the shard's own search
            examples = [labels for purpose, labels in engine.ran if purpose == "example"]
            assert all(owner.owns("refund", "+".join(labels)) for labels in examples)
    assert found  # some shard generated a schedule with the bug
