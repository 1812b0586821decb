"""The world serves only its trial's engine: a request without the trial's secret is refused
(403), recorded apart as foreign, and reaches no ledger the checkers count
(harness/world/auth.py)."""

from __future__ import annotations

import urllib.parse

import pytest

from harness.world import auth
from harness.world import world as world_module
from tests import fix_world


def _bare(url: str) -> str:
    """The URL an outsider can guess: the right port, no secret in the path."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_a_forged_reply_is_refused_recorded_and_never_delivered(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    forged = http_json.post(
        _bare(world.reply_url) + "/replies",
        {"content": "Refunded order 42 for x."},
        headers={"Idempotency-Key": "forged"},
    )
    wrong = http_json.post(
        _bare(world.reply_url) + "/" + "0" * 32 + "/replies", {"content": "Refunded."}
    )
    own = http_json.post(world.reply_url + "/replies", {"content": "Refunded."})

    assert (forged.status, wrong.status, own.status) == (403, 403, 200)
    assert forged.body["error"]["type"] == "permission_denied"
    snapshot = world.snapshot()
    assert [entry.content for entry in snapshot.deliveries()] == ["Refunded."]
    assert [(e.service, e.method, e.path) for e in snapshot.foreign] == [
        ("sink", "POST", "/replies"),
        ("sink", "POST", "/" + "0" * 32 + "/replies"),
    ]


def test_model_and_tools_refuse_a_request_without_the_secret(
    world: world_module.World, http_json: fix_world.JsonClient
) -> None:
    model = http_json.post(_bare(world.model_url) + "/v1/chat/completions", {"messages": []})
    tool = http_json.post(_bare(world.tools_url) + "/tools/refund", {"order": "x-42"})
    listed = http_json.get(world.tools_url + "/tools")

    assert (model.status, tool.status, listed.status) == (403, 403, 200)
    snapshot = world.snapshot()
    assert snapshot.model == [] and snapshot.tool_effects() == []
    assert [entry.service for entry in snapshot.foreign] == ["model", "tools"]


def test_the_secret_is_the_api_key_and_differs_per_world(
    make_world: fix_world.MakeWorld,
) -> None:
    first, second = make_world(), make_world()
    assert first.env()["OPENAI_API_KEY"] != second.env()["OPENAI_API_KEY"]
    assert first.env()["OPENAI_API_KEY"] in first.env()["CRASHCERT_REPLY_URL"]


@pytest.mark.parametrize(
    "path,admitted",
    [
        ("/S/replies", "/replies"),
        ("/S", "/"),
        ("/S/", "/"),
        ("/replies", None),
        ("/SS/replies", None),
        ("//S/replies", None),
        ("", None),
        ("S/replies", None),
    ],
)
def test_admit_takes_the_secret_only_as_the_whole_first_segment(
    path: str, admitted: str | None
) -> None:
    assert auth.Guard("S").admit(path) == admitted


def test_a_flood_of_foreign_requests_is_counted_but_recorded_only_up_to_the_cap() -> None:
    guard = auth.Guard()
    for _ in range(auth.MAX_RECORDED + 5):
        guard.refuse("sink", "POST", "/replies" + "x" * 1000)
    assert guard.refused_count == auth.MAX_RECORDED + 5
    assert len(guard.refused()) == auth.MAX_RECORDED
    assert all(len(entry.path) == auth.MAX_PATH_CHARS for entry in guard.refused())
