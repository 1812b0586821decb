"""Engines that ignore a budget, max_attempts or the approval gate are caught by the
bundled guarantee scenarios alone, without any fault: these bugs are not latent, any run
that reaches the limit shows them. The reference engine passes the same trials.
A guarantee about recovery (the fingerprint of a tool redeployed mid-call) needs a fault:
such a case carries it, and its broken engine must also PASS without it (latent, like the
incidents).

The named incident regressions (group `incident`, named after the public issue) are
latent like test_broken_engines.py's: the broken engine FAILs under the scenario's own
faults with the invariant its note names, and PASSes without them.

The engines are written like those of test_broken_engines.py (the reference engine with
one behaviour replaced) and share its helpers, and its filter:
`CRASHCERT_QUALITY_ONLY=name,...` starts the trials of these cases alone, a guarantee case
named by its engine and an incident by its scenario (so one can be hunted by itself).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
import yaml

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.trial import runner
from tests.quality import test_broken_engines as broken
from tests.quality import trial_pool

pytestmark = [pytest.mark.quality, pytest.mark.matrix, pytest.mark.postgres]

CASES = (
    # Asks the model a fourth time and finishes the script; the report shows 5 of 3.
    broken.Case(
        "ignore_iterations",
        "budget_iterations",
        (),
        ("run.liveness", "budget.not_restored"),
        says="expected budget_exhausted",
    ),
    # Pages the third team although two tool calls were the limit.
    broken.Case(
        "ignore_tool_calls",
        "budget_tool_calls",
        (),
        ("run.liveness", "budget.not_restored"),
        says="expected budget_exhausted",
    ),
    # The model is down for good; the run is claimed again and again, never dead-lettered
    # (until the schema's CHECK refuses the claim beyond max_attempts and the workers crash).
    broken.Case(
        "ignore_max_attempts",
        "dead_letter",
        (),
        ("run.liveness",),
        says="hung: not terminal",
    ),
    # Deletes the account although the operator rejected the deletion.
    broken.Case(
        "ignore_approval",
        "approval_rejected",
        (),
        ("tool.approval",),
        says="requires approval and reached the tool without one",
    ),
    # The address change reached the service, which was redeployed meanwhile, and the
    # worker was killed before it recorded the answer: the recovering worker replays the
    # call under the new fingerprint.
    broken.Case(
        "ignore_fingerprint",
        "tool_redeployed_in_flight",
        ("kill@tool.returned#1",),
        ("tool.unknown_outcome",),
        says="a call sent before its tool was redeployed",
    ),
    # The customer's client lost the acknowledgement of its refund request and sends it
    # again after the run finished: a second run refunds and replies again.
    broken.Case(
        "second_run_on_resubmit",
        "refund",
        ("submit_twice@run?when=after_finish",),
        ("run.single_submit",),
        says="a second run for run key",
    ),
)
IDS = [case.engine for case in CASES]
FAULTED = tuple(case for case in CASES if case.faults)

# The named incident regressions, one file each: the scenario named after the public issue,
# the broken engine reproducing it, the faults, and the invariant that must catch it.
INCIDENT_CASES = pathlib.Path(__file__).resolve().parent / "incidents"


def _incident(path: pathlib.Path) -> broken.Case:
    case = yaml.safe_load(path.read_text())
    assert case["scenario"] == path.stem, f"{path.name} names scenario {case['scenario']}"
    return broken.Case(
        case["engine"],
        case["scenario"],
        tuple(case["faults"]),
        tuple(case["catches"]),
        says=case.get("says", ""),
    )


INCIDENTS = tuple(_incident(path) for path in sorted(INCIDENT_CASES.glob("*.yaml")))
INCIDENT_IDS = [case.scenario for case in INCIDENTS]


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[broken.Trials]:
    out = tmp_path_factory.mktemp("guarantees")
    with shared.open_lab(commands.find("reference")) as base:
        pool = trial_pool.TrialPool()
        futures: broken.Trials = {}
        for case in CASES:
            if broken.ONLY and case.engine not in broken.ONLY:
                continue
            engine = broken.lab_for(base, commands.load(case.description))
            ref = str(case.description.relative_to(broken.REPO))
            faulted = bool(case.faults)
            jobs = {
                broken.BROKEN: (engine, broken.spec_for(case, engine_ref=ref, faults=faulted)),
                broken.REFERENCE: (
                    base,
                    broken.spec_for(case, engine_ref="reference", faults=faulted),
                ),
            }
            if faulted:
                jobs[broken.CLEAN] = (engine, broken.spec_for(case, engine_ref=ref, faults=False))
            for kind, (lab, spec) in jobs.items():
                submit = pool.submit_beside if broken.hangs(case, kind) else pool.submit
                futures[(case.engine, kind)] = submit(
                    broken.run_trial, lab, spec, out_dir=out / kind / case.engine
                )
        for case in INCIDENTS:
            if broken.ONLY and case.scenario not in broken.ONLY:
                continue
            engine = broken.lab_for(base, commands.load(case.description))
            ref = str(case.description.relative_to(broken.REPO))
            jobs = {
                broken.BROKEN: (engine, broken.spec_for(case, engine_ref=ref)),
                broken.REFERENCE: (base, broken.spec_for(case, engine_ref="reference")),
                broken.CLEAN: (engine, broken.spec_for(case, engine_ref=ref, faults=False)),
            }
            for kind, (lab, spec) in jobs.items():
                submit = pool.submit_beside if broken.hangs(case, kind) else pool.submit
                futures[(case.scenario, kind)] = submit(
                    broken.run_trial, lab, spec, out_dir=out / kind / case.scenario
                )
        with pool.running():
            yield futures


def _outcome(trials: broken.Trials, name: str, kind: str) -> runner.TrialOutcome:
    if (name, kind) not in trials:
        pytest.skip(f"not in CRASHCERT_QUALITY_ONLY={','.join(sorted(broken.ONLY))}")
    return trials[(name, kind)].result()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_broken_engine_is_caught_without_faults(trials: broken.Trials, case: broken.Case) -> None:
    """... or under the case's own faults, where it carries some."""
    outcome = _outcome(trials, case.engine, broken.BROKEN)
    results = broken.by_invariant(outcome)
    if case.faults:  # a fault that never struck proves nothing
        assert results[broken.PLAN_APPLIED].verdict is verdict.Verdict.PASS, broken.explain(outcome)
    missed = [
        invariant
        for invariant in case.catches
        if results[invariant].verdict is not verdict.Verdict.FAIL
    ]
    assert not missed, f"{case.engine}: {missed} not FAIL\n{broken.explain(outcome)}"
    assert case.says in results[case.catches[0]].summary, broken.explain(outcome)
    assert outcome.verdict is verdict.Verdict.FAIL, broken.explain(outcome)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reference_engine_passes(trials: broken.Trials, case: broken.Case) -> None:
    outcome = _outcome(trials, case.engine, broken.REFERENCE)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)


@pytest.mark.parametrize("case", FAULTED, ids=[case.engine for case in FAULTED])
def test_guarantee_engine_passes_without_the_fault(
    trials: broken.Trials, case: broken.Case
) -> None:
    """A bug of recovery is latent: the fault exposes it, not any clean run."""
    outcome = _outcome(trials, case.engine, broken.CLEAN)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)


@pytest.mark.parametrize("case", INCIDENTS, ids=INCIDENT_IDS)
def test_incident_engine_is_caught(trials: broken.Trials, case: broken.Case) -> None:
    outcome = _outcome(trials, case.scenario, broken.BROKEN)
    results = broken.by_invariant(outcome)
    assert results[broken.PLAN_APPLIED].verdict is verdict.Verdict.PASS, broken.explain(outcome)
    missed = [i for i in case.catches if results[i].verdict is not verdict.Verdict.FAIL]
    assert not missed, f"{case.scenario}: {missed} not FAIL\n{broken.explain(outcome)}"
    assert case.says in results[case.catches[0]].summary, broken.explain(outcome)


@pytest.mark.parametrize("case", INCIDENTS, ids=INCIDENT_IDS)
def test_reference_engine_passes_the_incident(trials: broken.Trials, case: broken.Case) -> None:
    outcome = _outcome(trials, case.scenario, broken.REFERENCE)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)


@pytest.mark.parametrize("case", INCIDENTS, ids=INCIDENT_IDS)
def test_incident_engine_passes_without_the_fault(trials: broken.Trials, case: broken.Case) -> None:
    outcome = _outcome(trials, case.scenario, broken.CLEAN)
    assert outcome.verdict is verdict.Verdict.PASS, broken.explain(outcome)
