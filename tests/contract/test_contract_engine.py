"""An engine written from harness/CONTRACT.md alone holds every invariant via the public path.

contract_engine/ (plain Python on PostgreSQL: leases with fencing epochs, the decision
checkpointed before any tool runs, stable idempotency keys, queryable tools and sinks asked
by key after a crash, unknown outcomes told to the model, tokens billed once per recorded
answer) is certified here over a cheap but telling subset: the refund (a queryable
non-replayable write) and email_send (a non-replayable write that cannot be asked about),
killed at the decision, inside both tool windows and inside the delivery window,
`:before_commit` twins included, so its level is capped at what that covers. Everything
FULL asks for is a plain `crashcert certify --engine tests/contract/contract_engine/engine.yaml`.
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

DESCRIPTION = pathlib.Path(__file__).resolve().parent / "contract_engine" / "engine.yaml"
SCENARIOS = ["refund", "email_send"]
POINTS = ["tools.pending", "tool.started", "tool.returned", "reply.sending"]
# harness/CONTRACT.md section 2: every boundary, and those reported before COMMIT too (*).
STARRED = [
    "model.pending",
    "tools.pending",
    "tool.started",
    "tool.settled",
    "model.ready",
    "reply.ready",
    "reply.sending",
    "run.finished",
]
CONTRACT_BOUNDARIES = [*STARRED, "run.claimed", "model.returned", "tool.returned", "reply.sent"]


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[certify.Certification]:
    with shared.open_lab(commands.load(DESCRIPTION)) as lab:
        yield certify.certify(
            lab,
            [(name, schema.find(name)) for name in SCENARIOS],
            out_dir=tmp_path_factory.mktemp("contract_engine"),
            engine_ref=str(DESCRIPTION),
            faults=["kill"],
            points=POINTS,
            time_kills=0,
            jobs=autojobs.Auto(),  # its kills wait out a 1 s lease: more than 2 fit
        )


def test_description_reports_every_boundary() -> None:
    reported = set(commands.load(DESCRIPTION).boundaries or ())
    assert {*CONTRACT_BOUNDARIES, *(f"{b}:before_commit" for b in STARRED)} <= reported


def test_contract_engine_earns_full(certified: certify.Certification) -> None:
    report = certify.to_markdown(certified)
    assert certified.modes == ["boundary"], report
    assert not certified.errors, report
    # Every invariant PASSed, its frontier read from the checkpoints table it exports too
    # (hits alone would be self-reported, which no level counts).
    assert certified.evidence_level is levels.Level.FULL, report
    assert not certified.self_reported, report
    assert certified.level is levels.Level.NONE, report  # kills at a few points: capped
    labels = {t["label"] for t in certify.to_json(certified)["trials"]}
    # The starred points are killed before their COMMIT too: --points X includes X:before_commit.
    assert "kill@tools.pending:before_commit#2" in labels, sorted(labels)
    assert "kill@reply.sending#1" in labels, sorted(labels)


def test_unanswerable_email_is_an_unknown_outcome(certified: certify.Certification) -> None:
    """Killed once the email was marked started: never sent again, the model is told."""
    (trial,) = [
        t
        for t in certify.to_json(certified)["trials"]
        if t["scenario"] == "email_send" and t["label"] == "kill@tool.started#1"
    ]
    (unknown,) = [i for i in trial["invariants"] if i["invariant"] == "tool.unknown_outcome"]
    assert unknown["verdict"] == "PASS", unknown
    assert "ended outcome_unknown and the model was told so" in unknown["summary"], unknown
