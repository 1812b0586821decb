"""The `upgrade` fault: a run started by version N is resumed by version N+1, and the
release redeploys the world's tools (new fingerprints). replay_across_upgrade's next version
replays a lookup started under N into the lookup's new version: `tool.unknown_outcome`
catches it under `upgrade@tool.returned#1`, while the same engine PASSes without the fault
and under a plain kill at the same point (version N recovers correctly: the bug is the next
version's). upgrade_misreads_old_checkpoints' next release reads a run's format 1 checkpoint
as its own format 2 with a fresh turn: at `upgrade@model.ready#2` it records turn 2's answer
as turn 0, which `budget.not_restored` catches; it too PASSes without the fault and under a
kill there. The reference engine PASSes both upgrades, its next release writing format 2
after the format 1 of version N; an engine with no next version is not upgraded
(INCONCLUSIVE, never FAIL).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.record import history
from harness.trial import runner
from harness.world import ledger
from tests.quality import test_broken_engines as broken
from tests.quality import trial_pool

pytestmark = [pytest.mark.quality, pytest.mark.matrix, pytest.mark.postgres]

CASE = broken.Case(
    "replay_across_upgrade",
    "refund",
    ("upgrade@tool.returned#1",),
    ("tool.unknown_outcome",),
    says="a call sent before its tool was redeployed",
)
# The same point without the upgrade: version N alone recovers.
KILLED = broken.Case("replay_across_upgrade", "refund", ("kill@tool.returned#1",), ())
# The next release that reads old checkpoints as its own format.
MISREAD = broken.Case(
    "upgrade_misreads_old_checkpoints",
    "refund",
    ("upgrade@model.ready#2",),
    ("budget.not_restored",),
    says="recorded model call of turn 0",
)
MISREAD_KILLED = broken.Case(MISREAD.engine, "refund", ("kill@model.ready#2",), ())
# An engine whose description names no next version.
NO_NEXT = broken.Case("ignore_fingerprint", "refund", ("upgrade@tool.returned#1",), ())
KILL, NO_UPGRADE = "kill", "no_upgrade"


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[broken.Trials]:
    out = tmp_path_factory.mktemp("upgrade")
    with shared.open_lab(commands.find("reference")) as base:
        engine = broken.lab_for(base, commands.load(CASE.description))
        ref = str(CASE.description.relative_to(broken.REPO))
        other = broken.lab_for(base, commands.load(NO_NEXT.description))
        other_ref = str(NO_NEXT.description.relative_to(broken.REPO))
        jobs = {
            broken.BROKEN: (engine, broken.spec_for(CASE, engine_ref=ref)),
            broken.REFERENCE: (base, broken.spec_for(CASE, engine_ref="reference")),
            broken.CLEAN: (engine, broken.spec_for(CASE, engine_ref=ref, faults=False)),
            KILL: (engine, broken.spec_for(KILLED, engine_ref=ref)),
            NO_UPGRADE: (other, broken.spec_for(NO_NEXT, engine_ref=other_ref)),
        }
        misread = broken.lab_for(base, commands.load(MISREAD.description))
        misread_ref = str(MISREAD.description.relative_to(broken.REPO))
        misread_jobs = {
            broken.BROKEN: (misread, broken.spec_for(MISREAD, engine_ref=misread_ref)),
            broken.REFERENCE: (base, broken.spec_for(MISREAD, engine_ref="reference")),
            broken.CLEAN: (misread, broken.spec_for(MISREAD, engine_ref=misread_ref, faults=False)),
            KILL: (misread, broken.spec_for(MISREAD_KILLED, engine_ref=misread_ref)),
        }
        everything = {
            **{(CASE.engine, kind): job for kind, job in jobs.items()},
            **{(MISREAD.engine, kind): job for kind, job in misread_jobs.items()},
        }
        pool = trial_pool.TrialPool()
        futures: broken.Trials = {
            key: pool.submit(runner.run_trial, lab, spec, out_dir=out / "-".join(key))
            for key, (lab, spec) in everything.items()
        }
        with pool.running():
            yield futures


def _outcome(trials: broken.Trials, kind: str, engine: str = CASE.engine) -> runner.TrialOutcome:
    return trials[(engine, kind)].result()


def test_the_next_version_replaying_into_the_new_tool_is_caught(trials: broken.Trials) -> None:
    outcome = _outcome(trials, broken.BROKEN)
    results = broken.by_invariant(outcome)
    assert results[broken.PLAN_APPLIED].verdict is verdict.Verdict.PASS, broken.explain(outcome)
    caught = results["tool.unknown_outcome"]
    assert caught.verdict is verdict.Verdict.FAIL, broken.explain(outcome)
    assert CASE.says in caught.summary, broken.explain(outcome)


def test_the_broken_engine_passes_without_the_upgrade(trials: broken.Trials) -> None:
    for kind in (broken.CLEAN, KILL):
        outcome = _outcome(trials, kind)
        assert outcome.verdict is verdict.Verdict.PASS, f"{kind}\n{broken.explain(outcome)}"


def test_the_reference_engine_resumes_under_its_next_version(trials: broken.Trials) -> None:
    outcome = _outcome(trials, broken.REFERENCE)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)
    trial = outcome.history
    (killed, upgraded) = [f for f in trial.faults() if f.planned == outcome.spec.plan[0]]
    assert (killed.action, upgraded.action, upgraded.ok) == ("kill", "upgraded", True), upgraded
    # Every tool of the scenario was redeployed at the upgrade, by no request of the engine's.
    redeployed = {
        entry.tool
        for entry in trial.tools
        if isinstance(entry, ledger.ToolRedeploy) and entry.after_request_seq is None
    }
    assert redeployed == {tool.name for tool in trial.scenario.tools}
    # The workers started after the upgrade are the ones that finished the run.
    started = [
        e for e in trial.events if isinstance(e, history.WorkerEvent) and e.event == "started"
    ]
    after = {e.worker_id for e in started if killed.seq < e.seq < upgraded.seq}
    finished = [hit for hit in trial.boundary_hits() if hit.point == "run.finished"]
    assert after and finished and {hit.worker_id for hit in finished} <= after


def test_an_engine_without_a_next_version_is_not_upgraded(trials: broken.Trials) -> None:
    outcome = _outcome(trials, NO_UPGRADE)
    results = broken.by_invariant(outcome)
    applied = results[broken.PLAN_APPLIED]
    assert applied.verdict is verdict.Verdict.INCONCLUSIVE, broken.explain(outcome)
    assert outcome.verdict is verdict.Verdict.INCONCLUSIVE, broken.explain(outcome)


def test_the_next_release_misreading_old_checkpoints_is_caught(trials: broken.Trials) -> None:
    outcome = _outcome(trials, broken.BROKEN, MISREAD.engine)
    results = broken.by_invariant(outcome)
    assert results[broken.PLAN_APPLIED].verdict is verdict.Verdict.PASS, broken.explain(outcome)
    caught = results[MISREAD.catches[0]]
    assert caught.verdict is verdict.Verdict.FAIL, broken.explain(outcome)
    assert MISREAD.says in caught.summary, broken.explain(outcome)
    for kind in (broken.CLEAN, KILL):
        outcome = _outcome(trials, kind, MISREAD.engine)
        assert outcome.verdict is verdict.Verdict.PASS, f"{kind}\n{broken.explain(outcome)}"


def test_the_reference_next_release_writes_its_format_after_version_ns(
    trials: broken.Trials,
) -> None:
    outcome = _outcome(trials, broken.REFERENCE, MISREAD.engine)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)
    tables = outcome.history.engine_tables or {}
    formats = [row["payload"]["v"] for row in sorted(tables["checkpoints"], key=_version)]
    # format 1 up to the upgrade, format 2 from the next release's first transition on
    assert formats == sorted(formats) and formats[0] == 1 and formats[-1] == 2, formats


def _version(row: dict[str, object]) -> int:
    return int(str(row["version"]))
