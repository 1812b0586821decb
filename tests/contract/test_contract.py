"""A reader who follows only harness/CONTRACT.md can write an engine and certify it.

naive_engine.py (plain Python, outside both packages) and naive_engine.yaml were written
from the contract. Certified at its own boundaries and as a black box, it earns what it
truly is, AT-LEAST-ONCE: runs finish after a kill, but a recovered run starts over, so
the refund reaches the payment service twice and the report says so.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from harness.campaigns import certify
from harness.checkers import levels
from harness.engines import commands
from harness.lab import shared
from harness.pool import autojobs
from harness.scenario import schema

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

HERE = pathlib.Path(__file__).resolve().parent
DESCRIPTION = HERE / "naive_engine.yaml"
DUPLICATE_REFUND = "refund_order"


@pytest.fixture(scope="module")
def lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.load(DESCRIPTION)) as opened:
        yield opened


def certify_naive(
    lab: shared.Lab, mode: str, points: list[str], out: pathlib.Path
) -> certify.Certification:
    return certify.certify(
        lab,
        [("refund", schema.find("refund"))],
        out_dir=out,
        engine_ref=str(DESCRIPTION),
        mode=mode,
        points=points,
        time_kills=0,
        jobs=autojobs.Auto(),
    )


def assert_at_least_once_with_duplicate_refund(cert: certify.Certification) -> None:
    report = certify.to_markdown(cert)
    assert not cert.errors, report
    assert cert.evidence_level is levels.Level.AT_LEAST_ONCE, report
    assert "run.liveness" in cert.held, report
    assert cert.verdict_of("tool.at_most_once").value == "FAIL", report
    named = certify.to_json(cert)["invariants"]["tool.at_most_once"]["first_problem"]
    assert DUPLICATE_REFUND in named and "2 effects in the world" in named, named


def test_description_follows_the_contract() -> None:
    engine = commands.load(DESCRIPTION)
    assert engine.boundaries and "tool.returned" in engine.boundaries


def test_naive_engine_at_its_boundaries(lab: shared.Lab, tmp_path: pathlib.Path) -> None:
    cert = certify_naive(lab, "boundary", ["tool.returned"], tmp_path)
    assert cert.modes == ["boundary"]
    assert {t.fault_class for t in cert.trials} == {"baseline", "kill@boundary"}
    assert_at_least_once_with_duplicate_refund(cert)


def test_naive_engine_as_a_black_box(lab: shared.Lab, tmp_path: pathlib.Path) -> None:
    cert = certify_naive(lab, "blackbox", ["world:tool.effect"], tmp_path)
    assert cert.modes == ["blackbox"]
    assert {t.fault_class for t in cert.trials} == {"baseline", "kill@world"}
    assert_at_least_once_with_duplicate_refund(cert)
    # Without boundaries, fencing is never passed by default.
    assert cert.verdict_of("lease.fencing").value == "INCONCLUSIVE"
