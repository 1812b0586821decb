"""OpenAI Agents SDK agents (Agent + Runner on the Responses API), certified as black boxes
at two points: the naive agent, run again from its input after a crash, refunds and replies
twice; the hardened one, replayed from its recorded model answers, does neither.
Optional: `pip install 'crashcert[openai-agents]'`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("agents", reason="openai-agents not installed (crashcert[openai-agents])")

from harness.campaigns import certify
from harness.report import certify_table
from tests.contract import frameworks_certify

pytestmark = [pytest.mark.postgres, pytest.mark.matrix]
FOLDER = "openai_agents_engine"


@pytest.fixture(scope="module")
def naive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[certify.Certification]:
    yield frameworks_certify.run(
        FOLDER, "openai_agents_naive", frameworks_certify.NAIVE_POINTS, tmp_path_factory
    )


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[certify.Certification]:
    yield frameworks_certify.run(
        FOLDER, "openai_agents_hardened", frameworks_certify.HARDENED_POINTS, tmp_path_factory
    )


def test_naive_agents_sdk_is_caught_as_a_black_box(naive: certify.Certification) -> None:
    report = certify.to_markdown(naive)
    assert not naive.errors, report
    assert naive.verdict_of("run.liveness").value == "PASS", report
    # Killed after the sink took the reply and run again from its input, the agent asks the
    # model again, calls the refund again with no key to tell the service it is a repeat,
    # and replies again.
    assert naive.verdict_of("tool.at_most_once").value == "FAIL", report
    assert "refund_order" in certify_table.first_problem(naive, "tool.at_most_once")
    assert naive.verdict_of("tool.same_key").value == "FAIL", report
    assert naive.verdict_of("reply.single_delivery").value == "FAIL", report
    # The answers of the killed attempt are billed and never reported, and every decided
    # turn is asked again.
    assert naive.verdict_of("budget.not_restored").value == "FAIL", report
    assert naive.verdict_of("model.count").value == "FAIL", report
    # Every request went to /v1/responses: no Chat Completions switch.
    assert "| OpenAI Agents SDK |" in report


def test_hardened_agents_sdk_passes_where_the_naive_failed(
    hardened: certify.Certification,
) -> None:
    report = certify.to_markdown(hardened)
    assert not hardened.errors, report
    for invariant in (
        "run.liveness",
        "tool.at_most_once",
        "tool.same_key",
        "tool.unknown_outcome",
        "reply.single_delivery",
        "budget.not_restored",
        "model.count",
        "transcript.intact",
    ):
        assert hardened.verdict_of(invariant).value == "PASS", (invariant, report)
    assert "| openai_agents_hardened | blackbox | NONE (CRASH-SAFE needs " in report
