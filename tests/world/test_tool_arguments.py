"""A tool scripted with `reject_invalid_arguments` refuses arguments that do not match its
declared parameters (422, for good, nothing applied); without it any object is served."""

from __future__ import annotations

from typing import Any

from harness.world import arguments
from tests import fix_world

PARAMETERS = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "quantity": {"type": "integer"},
        "unit": {"type": "string", "enum": ["piece", "box"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sku", "quantity"],
    "additionalProperties": False,
}


def _scenario(behaviour: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "world-tool-arguments",
        "input": {"user": "go"},
        "tools": [
            {
                "name": "check_stock",
                "parameters": PARAMETERS,
                "replay": "replayable",
                "effect": "read",
                "behaviour": behaviour,
            }
        ],
        "turns": [
            {"tool_calls": [{"id": "c1", "name": "check_stock", "arguments": {"sku": "a"}}]},
            {"content": "done"},
        ],
    }


def test_problems_name_each_wrong_field() -> None:
    assert arguments.problems(PARAMETERS, {"sku": "a", "quantity": 2}) == []
    assert arguments.problems(PARAMETERS, {"sku": "a", "quantity": 2.0}) == [
        "quantity: expected integer, got number"
    ]
    assert arguments.problems(PARAMETERS, {"quantity": True, "colour": "red"}) == [
        "sku: field required",
        "quantity: expected integer, got boolean",
        "colour: extra field not permitted",
    ]
    assert arguments.problems(
        PARAMETERS, {"sku": "a", "quantity": 1, "unit": "crate", "tags": ["x", 3]}
    ) == ["unit: 'crate' is not one of ['piece', 'box']", "tags[1]: expected string, got integer"]
    assert arguments.problems(PARAMETERS, ["sku"]) == ["arguments: expected object, got array"]
    # a number accepts an integer; keywords the module does not know are not judged
    assert arguments.problems({"type": "number", "minimum": 5}, 3) == []


def test_bad_arguments_are_refused_for_good_without_effect(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario({"reject_invalid_arguments": True, "result": {"in_stock": 7}}))
    url = f"{world.tools_url}/tools/check_stock"

    refused = [
        http_json.post(url, {"sku": "a", "quantity": "two"}, headers={"Idempotency-Key": "k"})
        for _ in range(2)
    ]
    served = http_json.post(url, {"sku": "a", "quantity": 2}, headers={"Idempotency-Key": "k2"})

    for reply in refused:
        assert reply.status == 422
        assert reply.body["applied"] is False
        assert reply.body["errors"] == ["quantity: expected integer, got string"]
        assert "quantity: expected integer" in reply.body["error"]["message"]
    assert (served.status, served.body["result"]) == (200, {"in_stock": 7})
    entries = world.snapshot().tool_requests("check_stock")
    assert [(e.status_code, e.outcome) for e in entries] == [
        (422, "rejected"),
        (422, "rejected"),
        (200, "ok"),
    ]
    assert len(world.snapshot().tool_effects("check_stock")) == 1


def test_without_the_behaviour_any_object_is_served(
    make_world: fix_world.MakeWorld, http_json: fix_world.JsonClient
) -> None:
    world = make_world(_scenario({}))

    reply = http_json.post(
        f"{world.tools_url}/tools/check_stock",
        {"quantity": "two"},
        headers={"Idempotency-Key": "k"},
    )

    assert reply.status == 200
    assert len(world.snapshot().tool_effects("check_stock")) == 1
