"""A real third-party engine: an agent workflow on DBOS Transact, certified as a black box.

DBOS records a step's output after the step returns, so a kill between a tool's effect
and that record runs the step again. With a fresh key per attempt the refund happens
twice; with keys derived from the workflow id and the step (asked by key before a
repeat) it happens once. Optional: `pip install crashcert[dbos]`.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

pytest.importorskip("dbos", reason="DBOS Transact not installed (pip install 'crashcert[dbos]')")

from harness.campaigns import certify
from harness.engines import commands
from harness.lab import shared
from harness.pool import autojobs
from harness.scenario import schema

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

HERE = pathlib.Path(__file__).resolve().parent / "dbos_engine"


@pytest.fixture(scope="module", params=["dbos_engine", "dbos_engine_keyed"])
def certified(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[certify.Certification]:
    description = HERE / f"{request.param}.yaml"
    with shared.open_lab(commands.load(description)) as lab:
        yield certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=tmp_path_factory.mktemp(request.param),
            engine_ref=str(description),
            points=["world:tool.effect"],
            time_kills=0,
            jobs=autojobs.Auto(),
        )


def test_dbos_engine_certified_in_black_box_mode(certified: certify.Certification) -> None:
    report = certify.to_markdown(certified)
    assert certified.modes == ["blackbox"], report
    assert not certified.errors, report
    assert "run.liveness" in certified.held, report
    at_most_once = certified.verdict_of("tool.at_most_once").value
    if certified.engine == "dbos_random_keys":
        # Killed after the refund's effect, before DBOS recorded the step: it runs again.
        assert at_most_once == "FAIL", report
        assert (
            "refund_order"
            in certify.to_json(certified)["invariants"]["tool.at_most_once"]["first_problem"]
        )
    else:
        assert at_most_once == "PASS", report
        assert certified.verdict_of("tool.same_key").value == "PASS", report
