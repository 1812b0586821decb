"""dup_owner catches an engine whose lease token names the worker id, not the process, at
every point the reference engine is certified to hold it; the reference engine PASSes the
same trials.

resume_own_runs resumes the runs leased to its worker id when it starts, keeping the lease
as it is. The twin dup_owner starts under the held worker's id therefore takes the run up;
the fault's fixed schedule (the twin moves first and is held there until the held worker
reported again) makes both act on the state the run had at the point, whatever the
machine's load: in the model window both ask the model for the one inference reserved
(budget.not_restored, which counts reservations as the answers come: in one CI run the
twin then reserved turn 1 and lost the run, and that reservation, never used, balanced
the end's totals), in the tool window both send the step's request
(tool.at_most_once). At run.claimed nothing is in flight yet: the twin's first move opens
the model call and the held worker answers it, so one more step of each owner decides
whether anything is done twice, and that race the schedule does not fix; the reference
engine is held to it there all the same. Without the fault the engine PASSes: the bug is
latent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.trial import runner
from tests.quality import test_broken_engines as broken
from tests.quality import trial_pool

pytestmark = [pytest.mark.quality, pytest.mark.matrix, pytest.mark.postgres]

ENGINE = "resume_own_runs"
SCENARIO = "vercel_2780_in_flight_step_redispatched"
# Where the reference engine must hold dup_owner (CONTRACT.md section 10, 2026-12-02).
POINTS = ("run.claimed#1", "model.pending#1", "tools.pending#1", "tool.started#1")
# Where the broken engine is caught, by what, and what its summary must say.
CAUGHT = {
    "model.pending#1": ("budget.not_restored", "an inference was not reserved"),
    "tools.pending#1": ("tool.at_most_once", "2 effects in the world"),
    "tool.started#1": ("tool.at_most_once", "2 effects in the world"),
}


def _case(point: str | None) -> broken.Case:
    faults = (f"dup_owner@{point}",) if point else ()
    invariant, says = CAUGHT.get(point or "", ("", ""))
    return broken.Case(ENGINE, SCENARIO, faults, (invariant,), says=says)


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[broken.Trials]:
    out = tmp_path_factory.mktemp("dup_owner")
    with shared.open_lab(commands.find("reference")) as base:
        engine = broken.lab_for(base, commands.load(_case(None).description))
        ref = str(_case(None).description.relative_to(broken.REPO))
        pool = trial_pool.TrialPool()
        futures: broken.Trials = {}
        for point in POINTS:
            case = _case(point)
            runs = [(broken.REFERENCE, base, "reference")]
            if point in CAUGHT:
                runs.insert(0, (broken.BROKEN, engine, ref))
            for kind, lab, engine_ref in runs:
                spec = broken.spec_for(case, engine_ref=engine_ref)
                futures[(point, kind)] = pool.submit(
                    runner.run_trial, lab, spec, out_dir=out / kind / point
                )
        clean = broken.spec_for(_case(None), engine_ref=ref, faults=False)
        futures[("", broken.CLEAN)] = pool.submit(
            runner.run_trial, engine, clean, out_dir=out / broken.CLEAN
        )
        with pool.running():
            yield futures


@pytest.mark.parametrize("point", sorted(CAUGHT))
def test_twin_under_the_same_id_is_caught(trials: broken.Trials, point: str) -> None:
    outcome = trials[(point, broken.BROKEN)].result()
    results = broken.by_invariant(outcome)
    assert results[broken.PLAN_APPLIED].verdict is verdict.Verdict.PASS, broken.explain(outcome)
    invariant, says = CAUGHT[point]
    caught = results[invariant]
    assert caught.verdict is verdict.Verdict.FAIL, broken.explain(outcome)
    assert says in caught.summary, broken.explain(outcome)
    # the twin took the run up: the fault's record says it moved first
    notes = [f.note for f in outcome.history.faults() if f.action == "dup_owner"]
    assert notes and "moved first" in notes[0], notes


@pytest.mark.parametrize("point", POINTS)
def test_reference_engine_fences_the_twin(trials: broken.Trials, point: str) -> None:
    outcome = trials[(point, broken.REFERENCE)].result()
    # (held at run.claimed, before its heartbeat starts, the worker's lease may lapse and
    # the twin take the run over under a new epoch: a handover, which fencing settles)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)


def test_engine_passes_without_a_twin(trials: broken.Trials) -> None:
    outcome = trials[("", broken.CLEAN)].result()
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)
