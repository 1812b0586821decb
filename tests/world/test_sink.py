"""The reply sink, and the world as a whole: env, one clock across services."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from harness.world import hooks as hooks_module
from harness.world import ledger
from harness.world import world as world_module
from tests import fix_world


def _scenario(*, queryable: bool = True, latency_ms: int = 0) -> dict[str, Any]:
    return {
        **fix_world.REFUND_SCENARIO,
        "sink": {"queryable": queryable, "latency_ms": latency_ms},
    }


def _reply(
    http_json: fix_world.JsonClient,
    world: world_module.World,
    body: Any,
    *,
    key: str | None = "reply-1",
) -> fix_world.JsonReply:
    headers = {"Idempotency-Key": key} if key else {}
    return http_json.post(f"{world.reply_url}/replies", body, headers=headers)


def test_every_post_is_a_delivery_even_with_one_key(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    body = {"run_id": "r1", "content": "Refunded."}

    first = _reply(http_json, world, body)
    resend = _reply(http_json, world, body)
    other = _reply(http_json, world, {"run_id": "r2", "content": "Other."}, key="reply-2")

    assert first.status == resend.status == other.status == 200
    assert first.body == {"delivered": True}
    deliveries = world.snapshot().deliveries()
    assert [(d.key, d.run_id, d.content) for d in deliveries] == [
        ("reply-1", "r1", "Refunded."),
        ("reply-1", "r1", "Refunded."),
        ("reply-2", "r2", "Other."),
    ]
    requests = world.snapshot().reply_requests()
    assert [r.outcome for r in requests] == ["delivered"] * 3
    assert [d.request_seq for d in deliveries] == [r.seq for r in requests]


def test_a_reply_without_key_is_delivered_with_key_none(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    assert _reply(http_json, world, {"content": "hi"}, key=None).status == 200

    (delivery,) = world.snapshot().deliveries()
    assert (delivery.key, delivery.run_id) == (None, None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (["content"], "must be a JSON object"),
        ({"run_id": "r1"}, "'content' must be a string"),
        ({"run_id": 5, "content": "x"}, "'run_id' must be a string"),
    ],
    ids=["not-an-object", "no-content", "run-id-not-a-string"],
)
def test_bad_replies_are_rejected_and_recorded(
    world: world_module.World, http_json: fix_world.JsonClient, body: Any, message: str
) -> None:
    reply = _reply(http_json, world, body)

    assert reply.status == 400
    assert message in reply.body["error"]["message"]
    snapshot = world.snapshot()
    assert [(r.status_code, r.outcome) for r in snapshot.reply_requests()] == [(400, "rejected")]
    assert snapshot.deliveries() == []


def test_latency_delays_the_acknowledgement(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(latency_ms=200))

    started = time.monotonic()
    assert _reply(http_json, world, {"content": "hi"}).status == 200
    assert time.monotonic() - started >= 0.2


def test_query_by_key_when_the_sink_allows_it(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(queryable=True))

    before = http_json.get(f"{world.reply_url}/replies/reply-1")
    _reply(http_json, world, {"run_id": "r1", "content": "Refunded."})
    after = http_json.get(f"{world.reply_url}/replies/reply-1")

    assert (before.status, before.body) == (404, {"delivered": False})
    assert (after.status, after.body) == (200, {"delivered": True})
    queries = world.snapshot().reply_queries()
    assert [(q.key, q.found, q.status_code) for q in queries] == [
        ("reply-1", False, 404),
        ("reply-1", True, 200),
    ]


def test_query_is_refused_when_the_sink_cannot_be_asked(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(queryable=False))
    _reply(http_json, world, {"run_id": "r1", "content": "Refunded."})

    refused = http_json.get(f"{world.reply_url}/replies/reply-1")

    assert refused.status == 405
    assert "cannot be queried" in refused.body["error"]["message"]
    (query,) = world.snapshot().reply_queries()
    assert (query.found, query.status_code) == (False, 405)


def test_reply_hook_runs_before_the_acknowledgement(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    entered, release, received = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[str | None, bool]] = []

    def hold(delivery: ledger.ReplyDelivery) -> None:
        seen.append((delivery.key, received.is_set()))
        entered.set()
        release.wait(5)

    world = make_world(_scenario(), hooks=hooks_module.WorldHooks(reply_accepted=hold))

    def send() -> fix_world.JsonReply:
        reply = _reply(http_json, world, {"run_id": "r1", "content": "Refunded."})
        received.set()
        return reply

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(send)
        assert entered.wait(5)
        assert len(world.snapshot().deliveries()) == 1  # delivered, not yet acknowledged
        assert not pending.done()
        release.set()
        assert pending.result(5).status == 200
    assert seen == [("reply-1", False)]


def test_hooks_can_be_set_on_a_running_world(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    keys: list[str | None] = []
    world.hooks.reply_accepted = lambda delivery: keys.append(delivery.key)

    _reply(http_json, world, {"content": "hi"})

    assert keys == ["reply-1"]


def test_env_points_at_the_three_services(world: world_module.World) -> None:
    env = world.env()

    assert env["OPENAI_BASE_URL"] == world.model_url
    assert env["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["OPENAI_BASE_URL"].endswith("/v1")
    secret = env["OPENAI_API_KEY"]
    assert len(secret) >= 32
    # Every base URL carries the trial's secret as its first path segment.
    for url in (world.model_url, world.tools_url, world.reply_url):
        assert url.split("/")[3] == secret
    assert env["CRASHCERT_TOOLS_URL"] == world.tools_url
    assert env["CRASHCERT_REPLY_URL"] == world.reply_url
    assert len({world.model_url, world.tools_url, world.reply_url}) == 3


def test_one_clock_orders_events_across_services(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    marker = world_module.run_marker("k1")
    http_json.post(
        f"{world.model_url}/chat/completions",
        {"messages": [{"role": "user", "content": marker}]},
    )
    http_json.post(f"{world.tools_url}/tools/refund", {"order": "k1-42"})
    _reply(http_json, world, {"run_id": "r1", "content": "Refunded order 42 for k1."})

    snapshot = world.snapshot()
    kinds = [entry.kind for entry in snapshot.entries()]
    assert kinds == [
        "model.request",
        "tool.request",
        "tool.effect",
        "reply.request",
        "reply.delivery",
    ]
    assert [entry.seq for entry in snapshot.entries()] == [1, 2, 3, 4, 5]
    # A snapshot is plain data: it survives a JSON round trip for the trial history.
    assert world_module.WorldSnapshot.model_validate_json(snapshot.model_dump_json()) == snapshot
