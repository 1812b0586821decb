"""The harness can fail: deliberately broken engines are caught, the reference engine is not.

Each engine in tests/quality/engines/ is the reference engine with one behaviour replaced
(a monkeypatched function of decide/worker/store/services, or the report it gives),
described by its own YAML file.
For each one, the targeted trial must FAIL the invariant that guards the broken guarantee,
and the unmodified reference engine must PASS exactly the same trial.

All engines share one Lab (one embedded Postgres, one Toxiproxy, one migrated template):
the variants only patch worker behaviour, so the reference engine's schema is theirs too.
A trial that stops Postgres gets a lab of its own (`run_trial`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
from collections.abc import Iterator

import pytest

from harness.checkers import verdict
from harness.engines import commands
from harness.faults import spec as fault_spec
from harness.lab import shared
from harness.planning import plan as plan_module
from harness.scenario import schema
from harness.trial import runner
from tests.quality import trial_pool

pytestmark = [pytest.mark.quality, pytest.mark.matrix, pytest.mark.postgres]

ENGINES = pathlib.Path(__file__).resolve().parent / "engines"
REPO = ENGINES.parent.parent.parent
PLAN_APPLIED = "plan.applied"
# `CRASHCERT_QUALITY_ONLY=engine,...` starts the trials of these cases alone (the fixture
# starts every case's trials at once, whatever `-k` selects): for working on one case.
ONLY = frozenset(filter(None, os.environ.get("CRASHCERT_QUALITY_ONLY", "").split(",")))
BROKEN, REFERENCE, CLEAN = "broken", "reference", "clean"


@dataclasses.dataclass(frozen=True)
class Case:
    engine: str  # tests/quality/engines/<engine>.yaml
    scenario: str
    faults: tuple[str, ...]
    catches: tuple[str, ...]  # invariant ids that must FAIL for the broken engine
    says: str = ""  # ... and what the first of them must say
    # The engine that must PASS the same trial: the reference engine, or its description
    # in a mode the broken variant shares (streaming).
    reference: str = "reference"

    @property
    def description(self) -> pathlib.Path:
        return ENGINES / f"{self.engine}.yaml"

    @property
    def label(self) -> str:
        return "+".join(self.faults)


CASES = (
    # The refund is executed before tools.pending commits; the kill just before that COMMIT
    # makes the recovering worker ask the model again and refund a second time.
    Case(
        "tools_before_checkpoint",
        "refund",
        ("kill@tools.pending:before_commit#2",),
        ("tool.at_most_once",),
    ),
    # Killed after the refund reached the payment service, before its outcome was recorded.
    Case(
        "reexecute_started",
        "refund",
        ("kill@tool.returned#2",),
        ("tool.unknown_outcome", "tool.at_most_once"),
    ),
    # Killed right after the refund decision committed: recovery must reuse it.
    Case("recall_model", "refund", ("kill@tools.pending#2",), ("model.once_after_decision",)),
    # Killed after two of three inferences were billed: the restart forgets 800 tokens and
    # the run only runs out of budget one inference too late.
    Case("restore_budget", "token_budget", ("kill@model.ready#2",), ("budget.not_restored",)),
    # The refund decision's first answer is lost to the kill and the model asked again; the
    # report keeps each turn's first try, so the answer the run went on with (and its 325
    # tokens) is missing, while the report still adds up.
    Case(
        "hide_model_call",
        "refund",
        ("kill@model.returned#2",),
        ("budget.not_restored",),
        says="the report bills no model call of turn 1",
    ),
    # The sink acknowledged, the worker died before recording it; the sink cannot be asked.
    Case("resend_reply", "sink_no_query", ("kill@reply.sent#1",), ("reply.single_delivery",)),
    # Killed after reply.sending committed, before the POST left: the recovering worker
    # takes the sink's 405 for "not delivered" and posts. One delivery, by luck: the resend
    # is blind all the same.
    Case(
        "assume_not_delivered",
        "sink_no_query",
        ("kill@reply.sending#1",),
        ("reply.single_delivery",),
        says="never resend blindly",
    ),
    # The zombie is paused right before its POST /replies; the adopter marks the delivery
    # sending again and dies before posting, so the zombie wakes up, delivers, and reaches
    # finish_delivered, whose SQL carries no epoch guard: only the lease check fences it.
    Case(
        "skip_lease_check",
        "refund",
        ("pause@reply.sending#1", "kill@reply.sending#2"),
        ("lease.fencing",),
    ),
    # Killed right after the terminal commit, before the reply was posted.
    Case("done_before_delivery", "refund", ("kill@run.finished#1",), ("reply.single_delivery",)),
    # The terminal COMMIT lands but its acknowledgement never comes back; the engine takes
    # the failure for a rollback and delivers the reply again.
    Case(
        "assume_rolled_back",
        "sink_no_query",
        ("commit_lost@run.finished:before_commit#1",),
        ("reply.single_delivery",),
        says="delivered 2 times",
    ),
    # Postgres restarts under every worker; none opens a new connection, so the run stays
    # where it was although the database is back: hung, not waiting for the database.
    # Recording the refund's outcome failed because the database failed over under the
    # worker; it ran the whole step again, refund included (a retry around call + record).
    Case(
        "retry_step_on_db_error",
        "refund",
        ("pg_failover@tool.returned#2?sync=1",),
        ("tool.at_most_once",),
        says="2 effects in the world",
    ),
    # An asynchronous failover lost the round closed at model.ready#1; the worker that
    # re-read found the database behind its cache and failed the run: run.liveness stays
    # strict after lost commits.
    Case(
        "fail_when_database_behind",
        "refund",
        ("pg_failover@model.ready#1?sync=0",),
        ("run.liveness",),
        says="expected succeeded",
    ),
    Case(
        "no_reconnect",
        "refund",
        ("pg_restart@tools.pending#1",),
        ("run.liveness",),
        says="hung: not terminal at the end",
    ),
    # Tools over MCP: killed once the refund's effect is applied (the world's hook, reached
    # through the MCP server), the recovering worker resends it to the key-honouring
    # service without the _meta that carries the key: a second refund.
    Case(
        "mcp_drops_meta_key",
        "refund_mcp",
        ("kill@world:tool.effect#2",),
        ("tool.at_most_once", "tool.same_key", "tool.unknown_outcome"),
        says="2 effects in the world",
    ),
    # The refund's effect is applied, its response lost (connection reset; no kill): the
    # worker sends the refund again under a fresh key, and the key-honouring payment
    # service applies it a second time.
    Case(
        "fresh_key_on_lost_response",
        "refund",
        ("response_lost@world:tool.effect#2",),
        ("tool.at_most_once", "tool.same_key"),
        says="2 effects in the world",
    ),
    # The first answer's stream ends after the first tool call (4 of its 9 chunks): the
    # worker acts on that call alone, as if the model had decided nothing else.
    Case(
        "acts_on_truncated_stream",
        "parallel_tools",
        ("stream_cut@world:model.answered#1?after_chunks=4",),
        ("transcript.intact",),
        says="are not the scripted",
        reference="reference_engine/engine_stream.yaml",
    ),
    # The tools link is down for a moment as the lookup starts (refused, so nothing left):
    # this variant fails the run instead of sending the same request again once it heals.
    Case(
        "fail_on_unreachable_tool",
        "refund",
        ("tool_cut@tool.started#1",),
        ("run.liveness",),
        says="tool service unreachable",
    ),
    # The tools link is down for 2.5 leases as the refund starts (refused, so nothing
    # left): this variant gives up after 0.3 s, tells the model "error" and goes on, and the
    # script's reply claims a refund the payment service never saw. Every other invariant
    # passes; the reference engine sends the same request again once the link heals.
    Case(
        "gives_up_on_refused_tool",
        "refund",
        ("tool_cut@tool.started#2",),
        ("tool.at_least_once",),
        says="0 effect(s) in the world, 1 needed",
    ),
    # The worker's clock falls an hour behind once it holds the refund run; paused before
    # posting the reply, its lease lapses and the adopter dies at its own reply.sending.
    # Woken, this variant trusts its clock (lease "live"), delivers and commits the finish
    # on a run that is no longer its own. With a true clock (the same pause and kill, no
    # skew) it sees the lease gone and stops: only clock_skew shows it.
    Case(
        "local_clock_lease",
        "refund",
        ("clock_skew@model.pending#1", "pause@reply.sending#1", "kill@reply.sending#2"),
        ("lease.fencing",),
    ),
)


@pytest.fixture(scope="module")
def base_lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference")) as lab:
        yield lab


def lab_for(base: shared.Lab, engine: commands.CommandEngine) -> shared.Lab:
    """The shared Postgres, Toxiproxy and template, driving another engine's workers."""
    return base.with_engine(engine)


def spec_for(case: Case, *, engine_ref: str, faults: bool = True) -> runner.TrialSpec:
    plan = [plan_module.parse_fault(fault) for fault in case.faults] if faults else []
    return runner.TrialSpec(
        scenario=schema.find(case.scenario),
        plan=plan,
        label=case.label if faults else "baseline",
        # Without faults nothing needs a standby worker; one process less to start matters,
        # since run.liveness counts a baseline's deadline from the trial's start.
        initial_workers=2 if faults else 1,
        scenario_ref=case.scenario,
        engine_ref=engine_ref,
    )


Trials = dict[tuple[str, str], concurrent.futures.Future[runner.TrialOutcome]]


def run_trial(
    lab: shared.Lab, spec: runner.TrialSpec, *, out_dir: pathlib.Path
) -> runner.TrialOutcome:
    """`runner.run_trial`, except that a trial that stops Postgres gets a Postgres of its own.

    On the shared one it must run alone until its restart heals (harness/lab/gate.py): it
    waited there for the hung engines' trials beside it (20-25 s each) while the trials
    queued behind it waited for it. A lab of its own opens in ~1 s and strikes nobody.
    """
    if not any(step.action in fault_spec.STOPS_POSTGRES for step in spec.plan):
        return runner.run_trial(lab, spec, out_dir=out_dir)
    with shared.open_lab(commands.find("reference")) as own:
        return runner.run_trial(own.with_engine(lab.engine), spec, out_dir=out_dir)


def hangs(case: Case, kind: str) -> bool:
    """The broken engine of a case caught by run.liveness never ends its run: its trial
    waits out the scenario's deadline (20-25 s)."""
    return kind == BROKEN and "run.liveness" in case.catches


@pytest.fixture(scope="module")
def trials(base_lab: shared.Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trials]:
    """Every trial of the module, started at once (trial_pool.py); a test waits for its own.

    Per case: the broken engine under the targeted faults, the reference engine under the
    same faults, and the broken engine without faults (its bug must stay latent).
    """
    out = tmp_path_factory.mktemp("quality")
    pool = trial_pool.TrialPool()
    futures: Trials = {}
    for case in CASES:
        if ONLY and case.engine not in ONLY:
            continue
        broken = lab_for(base_lab, commands.load(case.description))
        ref = str(case.description.relative_to(REPO))
        reference = base_lab
        if case.reference != "reference":
            reference = lab_for(base_lab, commands.load(REPO / case.reference))
        jobs = {
            BROKEN: (broken, spec_for(case, engine_ref=ref)),
            REFERENCE: (reference, spec_for(case, engine_ref=case.reference)),
            CLEAN: (broken, spec_for(case, engine_ref=ref, faults=False)),
        }
        for kind, (lab, spec) in jobs.items():
            directory = out / kind / case.engine
            submit = pool.submit_beside if hangs(case, kind) else pool.submit
            futures[(case.engine, kind)] = submit(run_trial, lab, spec, out_dir=directory)
    with pool.running():
        yield futures


def explain(outcome: runner.TrialOutcome) -> str:
    """Every non-passing result with its evidence, the trial directory and the rerun."""
    lines = [f"verdict {outcome.verdict.value}"]
    for result in outcome.failing:
        lines.append(f"{result.verdict.value} {result.invariant}: {result.summary}")
        lines.extend(f"    - {line}" for line in result.evidence)
    if outcome.history.harness_error:
        lines.append(f"harness error: {outcome.history.harness_error}")
    lines.append(f"trial: {outcome.directory}")
    lines.append(f"repro: {outcome.repro}")
    return "\n".join(lines)


def by_invariant(outcome: runner.TrialOutcome) -> dict[str, verdict.CheckResult]:
    return {result.invariant: result for result in outcome.results}


IDS = [case.engine for case in CASES]


def outcome_of(trials: Trials, case: Case, kind: str) -> runner.TrialOutcome:
    if (case.engine, kind) not in trials:
        pytest.skip(f"not in CRASHCERT_QUALITY_ONLY={','.join(sorted(ONLY))}")
    return trials[(case.engine, kind)].result()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_broken_engine_is_caught(trials: Trials, case: Case) -> None:
    outcome = outcome_of(trials, case, BROKEN)
    results = by_invariant(outcome)
    # A fault that never struck proves nothing about the engine.
    assert results[PLAN_APPLIED].verdict is verdict.Verdict.PASS, explain(outcome)
    missed = [
        invariant
        for invariant in case.catches
        if results[invariant].verdict is not verdict.Verdict.FAIL
    ]
    assert not missed, f"{case.engine}: {missed} not FAIL\n{explain(outcome)}"
    assert case.says in results[case.catches[0]].summary, explain(outcome)
    assert outcome.verdict is verdict.Verdict.FAIL, explain(outcome)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reference_engine_passes(trials: Trials, case: Case) -> None:
    outcome = outcome_of(trials, case, REFERENCE)
    assert outcome.verdict is verdict.Verdict.PASS, explain(outcome)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_broken_engine_passes_without_faults(trials: Trials, case: Case) -> None:
    """The bug is latent: only the fault exposes it (so the test proves the harness's
    fault, not a bug any clean run shows)."""
    outcome = outcome_of(trials, case, CLEAN)
    assert outcome.verdict is verdict.Verdict.PASS, explain(outcome)
