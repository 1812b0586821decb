"""A real engine whose durable store is not our Postgres: an agent workflow on Restate,
certified as a black box, with the lab starting a Restate server (and the front its workers
dial, restate_engine/restate_front.py) per trial and a Toxiproxy proxy per worker on its
`restate` store link.

Restate is a push model: the server runs an invocation on an HTTP/2 stream it opens to the
service's deployment, and journals a step's result when the endpoint sends it on that
stream. A worker killed after the refund's effect, or whose link breaks right after it
(vercel/workflow PR #2675: the completion never reaches the store), has the invocation
retried on the other worker, which runs the unjournaled step again: with a fresh key per
attempt the refund happens twice; with a key derived from the invocation and the call,
asked by key first, it happens once. Optional: `pip install 'crashcert[restate]'` and the
server from npm (`bash ci/bootstrap.sh`).
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import pathlib
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "restate", reason="Restate SDK not installed (pip install 'crashcert[restate]')"
)
pytest.importorskip(
    "hypercorn", reason="Hypercorn not installed (pip install 'crashcert[restate]')"
)

from harness.checkers import verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema
from harness.trial import runner

pytestmark = [pytest.mark.postgres, pytest.mark.toxiproxy, pytest.mark.matrix]

HERE = pathlib.Path(__file__).resolve().parent / "restate_engine"
# The regression is the engine-neutral one beside the Temporal example: it names no link,
# and the Restate descriptions have one.
REGRESSION = (
    HERE.parent / "temporal_engine" / "vercel_workflow_2675_completion_lost_after_effect.yaml"
)
# Killed in the world right after the refund's effect, before its answer left.
KILL_AFTER_REFUND = "kill@world:tool.effect#2"

# The engine's own module (not on sys.path: the lab runs it from its directory).
_spec = importlib.util.spec_from_file_location("restate_front", HERE / "restate_front.py")
assert _spec is not None and _spec.loader is not None
restate_front = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(restate_front)

if restate_front.find_server() is None:
    pytest.skip(
        f"the Restate server is not installed (bash ci/bootstrap.sh: npm install "
        f"@restatedev/restate-server@{restate_front.VERSION}, or RESTATE_SERVER_BIN)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, runner.TrialOutcome]]:
    """Four named trials at once, on one lab (each mostly waits out a retry's delay): each
    variant killed after the refund, and each under the #2675 regression (its store link
    reset after the refund)."""
    naive = commands.load(HERE / "restate_naive.yaml")
    hardened = commands.load(HERE / "restate_hardened.yaml")
    refund = schema.find("refund")
    regression = schema.load(REGRESSION)
    out = tmp_path_factory.mktemp("restate")
    with shared.open_lab(naive, require_toxiproxy=True) as lab:
        labs = {"naive": lab.as_black_box(), "hardened": lab.with_engine(hardened)}
        trials = {
            f"{variant}/{what}": (labs[variant], runner.TrialSpec.under(scenario, faults))
            for variant in labs
            for what, scenario, faults in (
                ("kill", refund, [KILL_AFTER_REFUND]),
                ("regression", regression, list(regression.faults)),
            )
        }
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(trials)) as pool:
            running = {
                name: pool.submit(runner.run_trial, trial_lab, spec, out_dir=out / name)
                for name, (trial_lab, spec) in trials.items()
            }
            yield {name: future.result() for name, future in running.items()}


def _verdicts(outcome: runner.TrialOutcome) -> dict[str, verdict.Verdict]:
    return {result.invariant: result.verdict for result in outcome.results}


def _evidence(outcome: runner.TrialOutcome) -> str:
    return "\n".join(f"{r.invariant} {r.verdict.value}: {r.summary}" for r in outcome.results)


@pytest.mark.parametrize("what", ["kill", "regression"])
def test_naive_restate_agent_refunds_twice(
    outcomes: dict[str, runner.TrialOutcome], what: str
) -> None:
    outcome = outcomes[f"naive/{what}"]
    found = _verdicts(outcome)
    assert found["plan.applied"] is verdict.Verdict.PASS, _evidence(outcome)
    assert found["tool.at_most_once"] is verdict.Verdict.FAIL, _evidence(outcome)
    at_most_once = next(r for r in outcome.results if r.invariant == "tool.at_most_once")
    assert "refund_order" in at_most_once.summary
    assert found["run.liveness"] is verdict.Verdict.PASS, _evidence(outcome)


@pytest.mark.parametrize("what", ["kill", "regression"])
def test_hardened_restate_agent_refunds_once(
    outcomes: dict[str, runner.TrialOutcome], what: str
) -> None:
    outcome = outcomes[f"hardened/{what}"]
    found = _verdicts(outcome)
    assert found["plan.applied"] is verdict.Verdict.PASS, _evidence(outcome)
    judged = {
        name: value for name, value in found.items() if value is not verdict.Verdict.INCONCLUSIVE
    }
    # Black box: what needs boundaries stays INCONCLUSIVE; everything judged holds.
    assert set(judged.values()) == {verdict.Verdict.PASS}, _evidence(outcome)
    for invariant in (
        "tool.at_most_once",
        "tool.same_key",
        "reply.single_delivery",
        "run.liveness",
    ):
        assert found[invariant] is verdict.Verdict.PASS, _evidence(outcome)


def test_the_store_fault_struck_the_worker_link(outcomes: dict[str, runner.TrialOutcome]) -> None:
    """The regression's fault is a store_cut on the worker's own proxy to the server."""
    for variant in ("naive", "hardened"):
        faults = [f for f in outcomes[f"{variant}/regression"].history.faults() if f.ok]
        struck = [f for f in faults if f.action == "store_cut"]
        assert struck and "-restate" in struck[0].note, faults
        assert any(f.action == "heal" for f in faults), faults
