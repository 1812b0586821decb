"""Exploration finds the broken engines of tests/quality on its own, and not the reference.

Nobody hands the search the failing schedule: it starts from a seed (random unless
CRASHCERT_EXPLORE_SEED is set; printed in every assertion message), draws schedules of up
to three faults over a few boundaries of the scenario, and must shrink what it finds to at
most two faults that fail the invariant guarding the broken guarantee. The explorations
share one Lab and run side by side (Hypothesis is thread-safe since 6.136.9).

The issue's full target, 300 schedules against the reference engine, is the `slow` test.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import random

import pytest

from harness.campaigns import explore
from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema

ENGINES = pathlib.Path(__file__).resolve().parents[2] / "quality" / "engines"
REPO = ENGINES.parent.parent.parent
SEED = int(os.environ.get("CRASHCERT_EXPLORE_SEED", random.randrange(2**16)))
EXAMPLES = int(os.environ.get("CRASHCERT_EXPLORE_EXAMPLES", "10"))
REFERENCE_EXAMPLES = int(os.environ.get("CRASHCERT_EXPLORE_REFERENCE_EXAMPLES", "6"))
SLOW_EXAMPLES = int(os.environ.get("CRASHCERT_EXPLORE_SLOW_EXAMPLES", "300"))
MUST_FIND = 3
MAX_SHRUNK = 2


@dataclasses.dataclass(frozen=True)
class Hunt:
    engine: str  # tests/quality/engines/<engine>.yaml
    scenario: str
    points: tuple[str, ...]  # the boundaries the search may fault (a targeted, cheap space)
    catches: str  # the invariant the shrunk failure must fail
    faults: tuple[str, ...] = ("kill", "pause")


HUNTS = (
    Hunt("resend_reply", "sink_no_query", ("reply.sent",), "reply.single_delivery"),
    Hunt("recall_model", "refund", ("tools.pending",), "model.once_after_decision"),
    Hunt("reexecute_started", "refund", ("tool.returned",), "tool.at_most_once"),
    Hunt("done_before_delivery", "refund", ("run.finished",), "reply.single_delivery"),
)


def lab_for(base: shared.Lab, engine: commands.CommandEngine) -> shared.Lab:
    """The shared Postgres, Toxiproxy, template and warm fork server, driving a broken
    variant's workers (a Lab built by hand had no fork server: every worker exec'd Python)."""
    return base.with_engine(engine)


def describe(result: explore.ExploreResult, *, engine: str) -> str:
    lines = [f"{engine}: " + line for line in explore.render(result)]
    return "\n".join([f"seed {SEED} (CRASHCERT_EXPLORE_SEED to replay)", *lines])


@pytest.mark.quality
@pytest.mark.matrix
@pytest.mark.postgres
def test_exploration_finds_broken_engines_and_shrinks_them(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    def hunt(case: Hunt) -> explore.ExploreResult:
        description = ENGINES / f"{case.engine}.yaml"
        return explore.explore(
            lab_for(base_lab, commands.load(description)),
            schema.find(case.scenario),
            out_dir=tmp_path / case.engine,
            examples=EXAMPLES,
            seed=SEED,
            faults=case.faults,
            max_faults=3,
            points=case.points,
            shrink_budget=8,
            replays=1,
            scenario_ref=case.scenario,
            engine_ref=str(description.relative_to(REPO)),
        )

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(HUNTS)) as pool:
        results = dict(zip(HUNTS, pool.map(hunt, HUNTS), strict=True))
    report = "\n".join(describe(result, engine=case.engine) for case, result in results.items())
    print(report)  # the figures, with -rP or on failure
    found = {case: result.failure for case, result in results.items() if result.failure}
    assert len(found) >= MUST_FIND, f"found {len(found)} of {len(HUNTS)}\n{report}"
    for case, failure in found.items():
        assert failure.status is explore.Status.REPRODUCIBLE, report
        assert 1 <= len(failure.schedule) <= MAX_SHRUNK, report
        assert case.catches in failure.invariants, report
        assert failure.schedule_file is not None
        replay = schema.load(failure.schedule_file)
        assert replay.faults == failure.labels
        assert all(f"--fault {label}" in failure.repro.replace("'", "") for label in replay.faults)


@pytest.mark.matrix
@pytest.mark.postgres
def test_reference_engine_survives_generated_schedules(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    result = explore.explore(
        base_lab,
        schema.find("refund"),
        out_dir=tmp_path,
        examples=REFERENCE_EXAMPLES,
        seed=SEED,
        faults=("kill", "pause"),
        max_faults=2,
        scenario_ref="refund",
    )
    report = describe(result, engine="reference")
    print(report)
    assert result.failure is None, report
    # Schedules Hypothesis draws twice run once: a few fewer trials than examples is normal.
    assert result.examples >= max(1, REFERENCE_EXAMPLES - 2), report
    assert not result.verdicts.get(verdict.Verdict.ERROR.value), report
    assert result.exit_code == 0


@pytest.mark.slow
@pytest.mark.matrix
@pytest.mark.postgres
@pytest.mark.parametrize("scenario", ["refund", "email_send", "parallel_tools"])
def test_reference_engine_survives_many_schedules(scenario: str, tmp_path: pathlib.Path) -> None:
    """The issue's target: 300 schedules (CRASHCERT_EXPLORE_SLOW_EXAMPLES) split over three
    scenarios, every fault class, up to three faults each; a Lab per scenario (Postgres
    restarts strike every trial of a Lab, so these do not share one)."""
    with shared.open_lab(commands.find("reference")) as lab:
        result = explore.explore(
            lab,
            schema.find(scenario),
            out_dir=tmp_path,
            examples=SLOW_EXAMPLES // 3,
            seed=SEED,
            faults=("kill", "pause", "db_cut", "commit_lost", "pg_restart"),
            scenario_ref=scenario,
        )
    report = describe(result, engine="reference")
    assert result.failure is None, report
    assert not result.verdicts.get(verdict.Verdict.ERROR.value), report


@pytest.mark.quality
@pytest.mark.matrix
@pytest.mark.postgres
def test_exploration_of_world_faults_finds_a_fresh_key_on_a_lost_response(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    """`crashcert explore --faults response_lost`: the schedules strike the world points the
    baseline's ledgers show (before, explore drew from boundary hits alone and refused).
    One fault each over the six world points of refund: the search runs them all within
    its examples, so any seed finds a lost tool response, which this engine resends under a
    new key (a few trials: the baseline, at most six, one replay)."""
    description = ENGINES / "fresh_key_on_lost_response.yaml"
    result = explore.explore(
        lab_for(base_lab, commands.load(description)),
        schema.find("refund"),
        out_dir=tmp_path,
        examples=8,
        seed=SEED,
        faults=("response_lost",),
        max_faults=1,
        shrink_budget=2,
        replays=1,
        scenario_ref="refund",
        engine_ref=str(description.relative_to(REPO)),
    )
    report = describe(result, engine="fresh_key_on_lost_response")
    print(report)
    assert result.failure is not None, report
    assert result.failure.status is explore.Status.REPRODUCIBLE, report
    [step] = result.failure.schedule
    assert (step.action, step.point) == ("response_lost", "world:tool.effect"), report
    assert "tool.same_key" in result.failure.invariants, report
    assert result.trials <= 7, report
