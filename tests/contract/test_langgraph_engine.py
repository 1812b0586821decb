"""LangGraph agents (StateGraph + ToolNode + PostgresSaver), certified.

The naive agent, as LangGraph's tutorials write it, is caught as a black box: a kill after
the refund's effect refunds twice, a kill after the sink took the reply delivers it twice.
The hardened agent, whose checkpointer reports the boundaries its commits make durable, is
judged in boundary mode. A few points only: `crashcert certify` runs the full matrix
(docs/frameworks.md). Optional: `pip install 'crashcert[langgraph]'`.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "langgraph", reason="LangGraph not installed (pip install 'crashcert[langgraph]')"
)
pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres missing")
pytest.importorskip("langchain_openai", reason="langchain-openai missing")

from harness.campaigns import certify
from harness.engines import commands
from harness.lab import shared
from harness.pool import autojobs
from harness.report import certify_table
from harness.scenario import schema

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]

HERE = pathlib.Path(__file__).resolve().parent / "langgraph_engine"


def _certify(
    name: str, points: list[str], tmp_path_factory: pytest.TempPathFactory
) -> certify.Certification:
    description = HERE / f"{name}.yaml"
    with shared.open_lab(commands.load(description)) as lab:
        return certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=tmp_path_factory.mktemp(name),
            engine_ref=str(description),
            points=points,
            time_kills=0,
            jobs=autojobs.Auto(),
        )


@pytest.fixture(scope="module")
def naive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[certify.Certification]:
    yield _certify(
        "langgraph_naive", ["world:tool.effect", "world:reply.accepted"], tmp_path_factory
    )


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[certify.Certification]:
    yield _certify(
        "langgraph_hardened", ["tool.returned", "tools.pending", "reply.sent"], tmp_path_factory
    )


def test_naive_langgraph_is_caught_as_a_black_box(naive: certify.Certification) -> None:
    report = certify.to_markdown(naive)
    assert naive.modes == ["blackbox"], report
    assert not naive.errors, report
    assert naive.verdict_of("run.liveness").value == "PASS", report
    # Resumed from the checkpoint before the tool node finished, ToolNode calls the refund
    # again, with no key to tell the service it is a repeat.
    assert naive.verdict_of("tool.at_most_once").value == "FAIL", report
    assert "refund_order" in certify_table.first_problem(naive, "tool.at_most_once")
    # A plain LangChain tool sends no idempotency key at all.
    assert naive.verdict_of("tool.same_key").value == "FAIL", report
    assert "no idempotency key" in certify_table.first_problem(naive, "tool.same_key")
    # Killed after the sink took the reply, the worker posts it again on resume.
    assert naive.verdict_of("reply.single_delivery").value == "FAIL", report
    assert naive.evidence_level.value == "AT-LEAST-ONCE", report
    assert "| LangGraph |" in report
    assert "| langgraph_naive | blackbox | NONE (AT-LEAST-ONCE needs kill struck" in report


def test_hardened_langgraph_in_boundary_mode(hardened: certify.Certification) -> None:
    report = certify.to_markdown(hardened)
    assert hardened.modes == ["boundary"], report
    assert not hardened.errors, report
    assert not hardened.not_applied, report
    for invariant in (
        "run.liveness",
        "tool.at_most_once",
        "tool.same_key",
        "reply.single_delivery",
    ):
        assert hardened.verdict_of(invariant).value == "PASS", report
    # The checkpointer's tools.pending is honoured: LangGraph reuses the saved writes of the
    # model node instead of asking the model again for that turn.
    assert hardened.verdict_of("model.once_after_decision").value == "PASS", report
    # Every commit of the agent is fenced by the lease (the checkpointer's too).
    assert hardened.verdict_of("lease.fencing").value == "PASS", report
    # What stops FULL: the agent reports no checkpoint versions (detail.frontier_version).
    assert hardened.verdict_of("frontier.monotonic").value == "INCONCLUSIVE", report
    assert hardened.evidence_level.value == "CRASH-SAFE", report
    assert "| langgraph_hardened | boundary | NONE (CRASH-SAFE needs " in report
    assert "`frontier.monotonic` INCONCLUSIVE" in report
