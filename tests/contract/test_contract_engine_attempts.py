"""The contract engine ends an attempt, not the run, when the model cannot serve it.

CONTRACT.md section 5, "Attempts and dead letters": a model that answers 5xx (after the
engine's own retries) or cannot be reached ends the attempt; the run is given back and, on
its last attempt, ends dead_lettered. Before the engine released the run it asked the model
again under its lease until the iteration budget ran out: `dead_letter` ended
budget_exhausted (run.liveness: "expected dead_lettered"), and a cut model link spent the
refund's iterations on refused requests.
"""

from __future__ import annotations

import concurrent.futures
import pathlib
from collections.abc import Iterator

import pytest

from harness.checkers import facts, verdict
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema
from harness.trial import runner

pytestmark = [pytest.mark.postgres, pytest.mark.matrix, pytest.mark.toxiproxy]

DESCRIPTION = pathlib.Path(__file__).resolve().parent / "contract_engine" / "engine.yaml"
CASES = [
    # every request of the second turn answers 500: three attempts, then dead_lettered
    ("dead_letter", []),
    # killed while holding the last attempt: the survivor dead-letters, never works it
    ("dead_letter", ["kill@run.claimed#3"]),
    # the model link refuses connections for a few leases: the same inference is asked
    # again once it heals, the run succeeds within its iteration budget
    ("refund", ["model_cut@model.pending#2"]),
]


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, concurrent.futures.Future[runner.TrialOutcome]]]:
    """The three trials at once (each mostly waits: 5xx retries, a lease, a healing link)."""
    out = tmp_path_factory.mktemp("attempts")
    with (
        shared.open_lab(commands.load(DESCRIPTION)) as lab,
        concurrent.futures.ThreadPoolExecutor(len(CASES)) as pool,
    ):
        yield {
            _id(name, faults): pool.submit(
                runner.run_trial, lab, _spec(name, faults), out_dir=out / str(index)
            )
            for index, (name, faults) in enumerate(CASES)
        }


def _id(name: str, faults: list[str]) -> str:
    return f"{name}:{'+'.join(faults)}"


def _spec(name: str, faults: list[str]) -> runner.TrialSpec:
    return runner.TrialSpec.under(
        schema.find(name), faults, scenario_ref=name, engine_ref=str(DESCRIPTION)
    )


@pytest.mark.parametrize("name,faults", CASES, ids=[_id(n, f) for n, f in CASES])
def test_contract_engine_passes(
    outcomes: dict[str, concurrent.futures.Future[runner.TrialOutcome]],
    name: str,
    faults: list[str],
) -> None:
    outcome = outcomes[_id(name, faults)].result()
    assert outcome.verdict is verdict.Verdict.PASS, "\n".join(
        [f"{r.invariant} {r.verdict.value}: {r.summary}" for r in outcome.failing]
    )
    assert facts.final_status(outcome.history) == outcome.spec.scenario.expect.status
