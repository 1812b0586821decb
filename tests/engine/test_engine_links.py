"""The reference engine's clients on a cut link (tool_cut, model_cut, sink_cut): a request
that never left is tried again; one that may have left is not sent blindly."""

from __future__ import annotations

from typing import Any

import pytest

from reference_engine import services


def _services() -> services.Services:
    return services.Services(
        tools_url=None,
        reply_url="http://127.0.0.1:9",
        timeout_s=1.0,
        backoff=services.Backoff(first_ms=1, max_ms=1, limit=3),
    )


def _scripted(monkeypatch: pytest.MonkeyPatch, *outcomes: Any) -> list[str]:
    """services._request answers from `outcomes` in turn (an exception is raised)."""
    calls: list[str] = []
    queue = list(outcomes)

    def request(method: str, url: str, **_: Any) -> services.Reply:
        calls.append(f"{method} {url}")
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(services, "_request", request)
    return calls


def test_a_refused_reply_is_sent_again_once_the_link_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = services.NotSent("connection refused")
    calls = _scripted(monkeypatch, refused, refused, services.Reply(201, {}))
    assert _services().send_reply("r1", "hello", "k1") == "sent"
    assert len(calls) == 3


def test_a_reply_that_may_have_left_is_never_resent(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, services.NoAnswer("reset"), services.Reply(201, {}))
    assert _services().send_reply("r1", "hello", "k1") == "unknown"
    assert len(calls) == 1


def test_a_link_down_past_every_retry_leaves_the_reply_not_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _scripted(monkeypatch, *[services.NotSent("refused")] * 4)
    assert _services().send_reply("r1", "hello", "k1") == "not_sent"
    assert len(calls) == 4
