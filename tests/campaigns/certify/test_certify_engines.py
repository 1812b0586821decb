"""Certification through the public path: engine description files, `certify`, a level.

The reference engine earns FULL; deliberately broken variants (tests/quality/engines/)
earn less, and the report names the invariant that guards the broken guarantee. Points
are restricted to the ones that expose each bug, so the module stays small.
"""

from __future__ import annotations

import json
import pathlib
import shlex
from collections.abc import Iterator

import click.testing
import pytest

from harness.campaigns import certify
from harness.checkers import levels
from harness.cli import main
from harness.contract import boundaries
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema
from harness.trial import artifacts

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

REPO = pathlib.Path(__file__).resolve().parents[3]
QUALITY = REPO / "tests" / "quality" / "engines"
JOBS = 3


@pytest.fixture(scope="module")
def base_lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference")) as lab:
        yield lab


def run(
    base: shared.Lab,
    description: pathlib.Path,
    scenario: str,
    points: list[str],
    out: pathlib.Path,
) -> certify.Certification:
    # The variants share the reference engine's schema, so its lab's template.
    return certify.certify(
        base.with_engine(commands.load(description)),
        [(scenario, schema.find(scenario))],
        out_dir=out,
        engine_ref=str(description),
        points=points,
        jobs=JOBS,
    )


def explain(cert: certify.Certification) -> str:
    return certify.to_markdown(cert)


def test_reference_engine_is_full(base_lab: shared.Lab, tmp_path: pathlib.Path) -> None:
    cert = run(
        base_lab, commands.reference_description_path(), "refund", ["tool.returned"], tmp_path
    )
    assert cert.modes == ["boundary"]
    # FULL on what ran; one point of one class is not what FULL rests on, and it says so
    assert cert.evidence_level is levels.Level.FULL, explain(cert)
    assert cert.level is levels.Level.NONE and cert.title.startswith("NONE (FULL needs pause")
    assert len(cert.trials) >= 2  # the baseline and at least one kill
    assert not any("--black-box" in trial.outcome.repro for trial in cert.trials)


def test_a_black_box_trial_reruns_as_a_black_box_trial(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    """certify's black-box rerun lines once replayed a boundary-mode trial: same fault
    text, but the engine then reported its own boundaries and was judged by them."""
    cert = certify.certify(
        base_lab,
        [("refund", schema.find("refund"))],
        out_dir=tmp_path / "certify",
        engine_ref="reference",
        mode="blackbox",
        points=["world:tool.effect"],
        time_kills=0,
        jobs=JOBS,
    )
    faulted = [trial for trial in cert.trials if trial.outcome.spec.plan]
    assert cert.modes == ["blackbox"] and faulted, explain(cert)
    assert all("--black-box" in trial.outcome.repro for trial in faulted)
    argv = shlex.split(faulted[0].outcome.repro)
    assert argv[0] == "crashcert"
    rerun = click.testing.CliRunner().invoke(
        main.main, [*argv[1:], "--out", str(tmp_path / "rerun")]
    )
    assert rerun.exit_code == faulted[0].outcome.verdict.exit_code, rerun.output
    (history_file,) = (tmp_path / "rerun").rglob("history.jsonl")
    again = artifacts.read_history(history_file)
    assert again.plan == faulted[0].outcome.spec.plan
    hits = [hit.point for hit in again.boundary_hits()]
    assert hits and all(boundaries.is_blackbox_point(point) for point in hits), hits


def test_resend_reply_is_caught_by_single_delivery(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    cert = run(base_lab, QUALITY / "resend_reply.yaml", "sink_no_query", ["reply.sent"], tmp_path)
    assert levels.rank(cert.level) < levels.rank(levels.Level.FULL), explain(cert)
    assert cert.evidence_level is levels.Level.AT_LEAST_ONCE, explain(cert)
    document = certify.to_json(cert)
    assert document["invariants"]["reply.single_delivery"]["verdict"] == "FAIL"
    failing = [f for f in document["failing"] if "reply.single_delivery" in f["invariants"]]
    assert failing and "kill@reply.sent#1" in failing[0]["repro"]
    markdown = certify.to_markdown(cert)
    assert "crashcert-NONE%20%28kill%29-red" in markdown  # kills at one point: capped
    assert "AT-LEAST-ONCE needs kill struck 1/" in markdown
    assert "crashcert run --engine" in markdown and "reply.single_delivery FAIL" in markdown
    json.dumps(document)  # serialisable as written by --json


def test_recall_model_is_caught_by_once_after_decision(
    base_lab: shared.Lab, tmp_path: pathlib.Path
) -> None:
    cert = run(base_lab, QUALITY / "recall_model.yaml", "refund", ["tools.pending"], tmp_path)
    assert levels.rank(cert.level) < levels.rank(levels.Level.FULL), explain(cert)
    assert "model.once_after_decision" not in cert.held
    assert cert.verdict_of("model.once_after_decision").value == "FAIL", explain(cert)
    # The refund itself is never repeated: the effects stay safe.
    assert cert.verdict_of("tool.at_most_once").value == "PASS", explain(cert)
    assert "model.once_after_decision FAIL" in certify.to_markdown(cert)
