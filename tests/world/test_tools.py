"""The tool services: scripted behaviours, idempotency, query by key, and their ledger."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from harness import errors
from harness.scenario import schema
from harness.world import hooks as hooks_module
from harness.world import ledger
from harness.world import world as world_module
from tests import fix_world


def _scenario(**tools: dict[str, Any]) -> dict[str, Any]:
    """A scenario declaring `tools` (name -> extra fields) that calls each one once."""
    specs = [
        {"name": name, "replay": "non_replayable", "effect": "write", **fields}
        for name, fields in tools.items()
    ]
    calls = [{"id": f"call_{name}", "name": name} for name in tools]
    return {
        "name": "world-tools",
        "input": {"user": "go"},
        "tools": specs,
        "turns": [{"tool_calls": calls}, {"content": "done"}],
    }


def _call(
    http_json: fix_world.JsonClient,
    world: world_module.World,
    tool: str,
    arguments: Any,
    *,
    key: str | None = "k1",
    timeout: float | None = None,
) -> fix_world.JsonReply:
    headers = {"Idempotency-Key": key} if key else {}
    return http_json.post(
        f"{world.tools_url}/tools/{tool}", arguments, headers=headers, timeout=timeout
    )


def _outcomes(world: world_module.World, tool: str) -> list[tuple[int, str]]:
    return [(e.status_code, e.outcome) for e in world.snapshot().tool_requests(tool)]


def test_lists_declarations(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"queryable": True}, lookup={"effect": "read"}))

    reply = http_json.get(f"{world.tools_url}/tools")

    assert reply.status == 200
    declared = {tool["function"]["name"]: tool for tool in reply.body["tools"]}
    assert declared["refund"] == world.scenario.tool("refund").declaration()
    assert declared["refund"]["queryable"] is True
    assert declared["lookup"]["effect"] == "read"
    assert len(declared["lookup"]["fingerprint"]) == 16


def test_a_key_honouring_service_applies_one_effect_per_key(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    result = {"refund_id": "rf-1"}
    world = make_world(
        _scenario(refund={"honours_idempotency_key": True, "behaviour": {"result": result}})
    )

    first = _call(http_json, world, "refund", {"order": "42"})
    repeat = _call(http_json, world, "refund", {"order": "42"})
    other_key = _call(http_json, world, "refund", {"order": "42"}, key="k2")

    assert first.status == repeat.status == other_key.status == 200
    assert first.body == repeat.body == {"result": result}
    assert _outcomes(world, "refund") == [(200, "ok"), (200, "deduplicated"), (200, "ok")]
    effects = world.snapshot().tool_effects("refund")
    assert [effect.key for effect in effects] == ["k1", "k2"]
    requests = world.snapshot().tool_requests("refund")
    assert effects[0].request_seq == requests[0].seq
    assert requests[1].result == result


def test_a_service_ignoring_keys_applies_every_request(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={}))

    for _ in range(2):
        assert _call(http_json, world, "refund", {"order": "42"}).status == 200

    snapshot = world.snapshot()
    assert len(snapshot.tool_requests("refund")) == 2
    assert [effect.key for effect in snapshot.tool_effects("refund")] == ["k1", "k1"]


def test_racing_requests_with_one_key_make_one_effect(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"honours_idempotency_key": True}))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(lambda _: _call(http_json, world, "refund", {"order": "42"}), range(8))
        )

    assert {reply.status for reply in replies} == {200}
    assert len(world.snapshot().tool_effects("refund")) == 1
    assert sorted(outcome for _, outcome in _outcomes(world, "refund")) == ["deduplicated"] * 7 + [
        "ok"
    ]


def test_fail_first_answers_503_without_effect_per_arguments(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"fail_first": 2}}))

    statuses = [_call(http_json, world, "refund", {"order": "42"}).status for _ in range(3)]
    failed = _call(http_json, world, "refund", {"order": "43"})

    assert statuses == [503, 503, 200]
    assert failed.status == 503  # a different logical call fails on its own count
    assert failed.body["applied"] is False
    assert failed.body["error"]["type"] == "service_unavailable"
    assert _outcomes(world, "refund") == [
        (503, "failed_before_effect"),
        (503, "failed_before_effect"),
        (200, "ok"),
        (503, "failed_before_effect"),
    ]
    assert len(world.snapshot().tool_effects("refund")) == 1


def test_argument_order_does_not_make_a_new_logical_call(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"fail_first": 1}}))

    assert _call(http_json, world, "refund", {"a": 1, "b": 2}).status == 503
    assert _call(http_json, world, "refund", {"b": 2, "a": 1}).status == 200


@pytest.mark.parametrize(
    ("honours", "retry_outcome", "effects"),
    [(True, "deduplicated", 1), (False, "ok", 2)],
    ids=["honours-key", "ignores-key"],
)
def test_effect_then_fail_applies_then_answers_500(
    make_world: fix_world.MakeWorld,
    http_json: fix_world.JsonClient,
    honours: bool,
    retry_outcome: str,
    effects: int,
) -> None:
    tool = {"honours_idempotency_key": honours, "behaviour": {"effect_then_fail": 1}}
    world = make_world(_scenario(refund=tool))

    failed = _call(http_json, world, "refund", {"order": "42"})
    retried = _call(http_json, world, "refund", {"order": "42"})

    assert failed.status == 500
    assert failed.body["applied"] is None
    assert retried.status == 200
    assert _outcomes(world, "refund") == [(500, "effect_then_failed"), (200, retry_outcome)]
    assert len(world.snapshot().tool_effects("refund")) == effects


def test_fail_first_then_effect_then_fail_in_order(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"fail_first": 1, "effect_then_fail": 1}}))

    statuses = [_call(http_json, world, "refund", {}, key=None).status for _ in range(3)]

    assert statuses == [503, 500, 200]
    assert len(world.snapshot().tool_effects("refund")) == 2


def test_query_by_key(make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient) -> None:
    world = make_world(
        _scenario(
            refund={"queryable": True, "behaviour": {"result": {"id": 7}, "effect_then_fail": 1}},
            email={},
        )
    )
    url = f"{world.tools_url}/tools/refund/effects"

    before = http_json.get(f"{url}/k1")
    _call(http_json, world, "refund", {"order": "42"})  # 500, but applied
    after = http_json.get(f"{url}/k1")
    refused = http_json.get(f"{world.tools_url}/tools/email/effects/k1")
    unknown = http_json.get(f"{world.tools_url}/tools/nope/effects/k1")

    assert (before.status, before.body) == (404, {"applied": False})
    assert (after.status, after.body) == (200, {"applied": True, "result": {"id": 7}})
    assert refused.status == 405
    assert "cannot be queried" in refused.body["error"]["message"]
    assert unknown.status == 404
    queries = world.snapshot().tool_queries()
    assert [(q.tool, q.found, q.status_code) for q in queries] == [
        ("refund", False, 404),
        ("refund", True, 200),
        ("email", False, 405),
    ]


def test_hang_never_answers_and_stop_returns_promptly(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"hang": True}}))

    with pytest.raises(TimeoutError):
        _call(http_json, world, "refund", {"order": "42"}, timeout=0.3)

    assert _outcomes(world, "refund") == [(0, "hung")]
    assert world.snapshot().tool_effects() == []
    started = time.monotonic()
    world.stop()
    assert time.monotonic() - started < 2.0


def test_stop_does_not_wait_for_a_request_still_hanging(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"hang": True}}))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(_call, http_json, world, "refund", {}, timeout=30)
        fix_world.wait_for(lambda: _outcomes(world, "refund"), what="the hung request")

        started = time.monotonic()
        world.stop()
        assert time.monotonic() - started < 2.0
        # The client sees the connection closed, not an answer.
        with pytest.raises(OSError):
            pending.result(5)


def test_latency_delays_the_answer(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario(refund={"behaviour": {"latency_ms": 200}}))

    started = time.monotonic()
    assert _call(http_json, world, "refund", {}).status == 200
    assert time.monotonic() - started >= 0.2


@pytest.mark.parametrize(
    ("path", "raw", "status", "message"),
    [
        ("/tools/nope", b"{}", 404, "no tool 'nope'"),
        ("/tools/refund", b"[1]", 400, "must be a JSON object"),
        ("/tools/refund", b"{oops", 400, "not valid JSON"),
    ],
    ids=["unknown-tool", "not-an-object", "bad-json"],
)
def test_rejected_requests_are_recorded(
    make_world: fix_world.MakeWorld,
    http_json: fix_world.JsonClient,
    path: str,
    raw: bytes,
    status: int,
    message: str,
) -> None:
    world = make_world(_scenario(refund={}))

    reply = http_json.post(f"{world.tools_url}{path}", raw=raw, headers={"Idempotency-Key": "k"})

    assert reply.status == status
    assert message in reply.body["error"]["message"]
    (entry,) = world.snapshot().tool_requests()
    assert (entry.status_code, entry.outcome, entry.key) == (status, "rejected", "k")
    assert world.snapshot().tool_effects() == []
    assert _call(http_json, world, "refund", {}).status == 200  # still serving


def test_effect_hook_runs_before_the_response_leaves(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    entered, release, received = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[str, bool]] = []

    def hold(effect: ledger.ToolEffect) -> None:
        seen.append((effect.tool, received.is_set()))
        entered.set()
        release.wait(5)

    world = make_world(
        _scenario(refund={}), hooks=hooks_module.WorldHooks(tool_effect_applied=hold)
    )

    def call() -> fix_world.JsonReply:
        reply = _call(http_json, world, "refund", {"order": "42"})
        received.set()
        return reply

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call)
        assert entered.wait(5)
        # The effect is in the ledger; its answer has not left yet.
        assert len(world.snapshot().tool_effects("refund")) == 1
        assert not pending.done()
        release.set()
        assert pending.result(5).status == 200
    assert seen == [("refund", False)]


def test_redeploy_changes_the_declared_fingerprint_after_the_scripted_request(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(
        _scenario(
            lookup={"replay": "replayable", "redeploy": {"after_requests": 2, "version": "2"}}
        )
    )

    def fingerprint() -> str:
        reply = http_json.get(f"{world.tools_url}/tools")
        return str(reply.body["tools"][0]["fingerprint"])

    before = fingerprint()
    assert _call(http_json, world, "lookup", {"order": "42"}).status == 200
    assert fingerprint() == before  # one request of the two
    assert _call(http_json, world, "lookup", {"order": "42"}).status == 200
    after = fingerprint()
    assert _call(http_json, world, "lookup", {"order": "42"}).status == 200

    assert after != before
    assert after == world.scenario.tool("lookup").redeployed().fingerprint
    assert fingerprint() == after  # redeployed once, for good
    redeploys = [e for e in world.snapshot().tools if isinstance(e, ledger.ToolRedeploy)]
    second = world.snapshot().tool_requests("lookup")[1]
    assert [(e.tool, e.version, e.fingerprint) for e in redeploys] == [("lookup", "2", after)]
    assert redeploys[0].after_request_seq == second.seq
    assert second.seq < redeploys[0].seq  # recorded before that request was answered


def test_a_redeploy_to_the_same_version_is_refused() -> None:
    data = _scenario(lookup={"version": "3", "redeploy": {"version": "3"}})
    with pytest.raises(errors.CrashcertError, match=r"redeploy\.version must differ"):
        schema.parse(data)


def test_an_upgrade_redeploys_every_tool_once_and_the_scripted_redeploy_after_it_is_past(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(
        _scenario(
            lookup={"replay": "replayable", "redeploy": {"after_requests": 1, "version": "2"}},
            refund={},
        )
    )

    def fingerprints() -> dict[str, str]:
        reply = http_json.get(f"{world.tools_url}/tools")
        tools = reply.body["tools"]
        return {tool["function"]["name"]: str(tool["fingerprint"]) for tool in tools}

    before = fingerprints()
    changed = world.tools.upgrade("next")
    after = fingerprints()
    assert [(e.tool, e.version, e.after_request_seq) for e in changed] == [
        ("lookup", "1+next", None),
        ("refund", "1+next", None),
    ]
    assert {name: after[name] != before[name] for name in before} == {
        "lookup": True,
        "refund": True,
    }
    assert world.tools.upgrade("next") == []  # already this release
    # The lookup's scripted redeploy (after its first request) comes after the upgrade:
    # the upgraded declaration stays, and no second change is recorded.
    assert _call(http_json, world, "lookup", {"order": "42"}).status == 200
    assert fingerprints() == after
    redeploys = [e for e in world.snapshot().tools if isinstance(e, ledger.ToolRedeploy)]
    assert [e.tool for e in redeploys] == ["lookup", "refund"]
