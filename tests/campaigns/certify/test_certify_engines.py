"""Certification through the public path: engine description files, `certify`, a level.

The reference engine earns FULL; deliberately broken variants (tests/quality/engines/)
earn less, and the report names the invariant that guards the broken guarantee. Points
are restricted to the ones that expose each bug, so the module stays small.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from harness.campaigns import certify
from harness.checkers import levels
from harness.contract.engines import commands
from harness.lab import shared as lab_module
from harness.scenario import schema as scenario_module

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

REPO = pathlib.Path(__file__).resolve().parents[3]
QUALITY = REPO / "tests" / "quality" / "engines"
JOBS = 3


@pytest.fixture(scope="module")
def base_lab() -> Iterator[lab_module.Lab]:
    with lab_module.open_lab(commands.find("reference")) as lab:
        yield lab


def run(
    base: lab_module.Lab,
    description: pathlib.Path,
    scenario: str,
    points: list[str],
    out: pathlib.Path,
) -> certify.Certification:
    engine = commands.load(description)
    lab = lab_module.Lab(
        pg=base.pg,
        engine=engine,
        template=base.template,  # the variants share the reference engine's schema
        toxiproxy=base.toxiproxy,
        toxiproxy_note=base.toxiproxy_note,
        forkserver=base.forkserver if engine.preload == base.engine.preload else None,
    )
    return certify.certify(
        lab,
        [(scenario, scenario_module.find(scenario))],
        out_dir=out,
        engine_ref=str(description),
        points=points,
        jobs=JOBS,
    )


def explain(cert: certify.Certification) -> str:
    return certify.to_markdown(cert)


def test_reference_engine_is_full(base_lab: lab_module.Lab, tmp_path: pathlib.Path) -> None:
    cert = run(
        base_lab, commands.reference_description_path(), "refund", ["tool.returned"], tmp_path
    )
    assert cert.modes == ["boundary"]
    assert cert.level is levels.Level.FULL, explain(cert)
    assert len(cert.trials) >= 2  # the baseline and at least one kill


def test_resend_reply_is_caught_by_single_delivery(
    base_lab: lab_module.Lab, tmp_path: pathlib.Path
) -> None:
    cert = run(base_lab, QUALITY / "resend_reply.yaml", "sink_no_query", ["reply.sent"], tmp_path)
    assert levels.rank(cert.level) < levels.rank(levels.Level.FULL), explain(cert)
    assert cert.level is levels.Level.AT_LEAST_ONCE, explain(cert)
    document = certify.to_json(cert)
    assert document["invariants"]["reply.single_delivery"]["verdict"] == "FAIL"
    failing = [f for f in document["failing"] if "reply.single_delivery" in f["invariants"]]
    assert failing and "kill@reply.sent#1" in failing[0]["repro"]
    markdown = certify.to_markdown(cert)
    assert "crashcert-AT--LEAST--ONCE-orange" in markdown
    assert "crashcert run --engine" in markdown and "reply.single_delivery FAIL" in markdown
    json.dumps(document)  # serialisable as written by --json


def test_recall_model_is_caught_by_once_after_decision(
    base_lab: lab_module.Lab, tmp_path: pathlib.Path
) -> None:
    cert = run(base_lab, QUALITY / "recall_model.yaml", "refund", ["tools.pending"], tmp_path)
    assert levels.rank(cert.level) < levels.rank(levels.Level.FULL), explain(cert)
    assert "model.once_after_decision" not in cert.held
    assert cert.verdict_of("model.once_after_decision").value == "FAIL", explain(cert)
    # The refund itself is never repeated: the effects stay safe.
    assert cert.verdict_of("tool.at_most_once").value == "PASS", explain(cert)
    assert "model.once_after_decision FAIL" in certify.to_markdown(cert)
