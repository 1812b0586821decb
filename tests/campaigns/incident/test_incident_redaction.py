"""`incident export --redact` leaves no secret of a run, wherever in the run it sat.

The run is literal engine tables (the reference engine's export) with real-looking secrets
in every position: system prompt, user input, tool descriptions and parameter schemas,
tool-call arguments (as keys and as values), tool results, the model's reply, the delivered
reply, the failure reason and the event data.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import click.testing
import yaml

from harness.cli import main
from harness.incident import incident, redaction
from harness.record import history
from harness.scenario import schema
from harness.trial import artifacts

EMAIL = "ops-lead@example.com"
OTHER_EMAIL = "jane.doe@example.org"
API_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
PHONE = "+1-415-555-0142"
PHONE_NUMBER = 4155550142  # the same phone as a JSON number
SECRETS = (EMAIL, OTHER_EMAIL, API_KEY, PHONE, str(PHONE_NUMBER))
# Fragments that must not survive either: a secret cut or re-quoted is still a leak.
FRAGMENTS = ("ops-lead", "jane.doe", "example.com", "example.org", "sk-proj", "555-0142", "@")
RUN_ID = "7d1c6f0e-0000-4000-8000-000000000001"
RUN_KEY = "incident-run-key-1"


def _tables() -> dict[str, list[dict[str, Any]]]:
    arguments = {
        OTHER_EMAIL: {"phone": PHONE, "api_key": API_KEY, "dial": PHONE_NUMBER},
        "note": f"call {PHONE} or write to {EMAIL}",
        "cc": [EMAIL, OTHER_EMAIL],
    }
    result = {EMAIL: API_KEY, "contact": {"phone": PHONE, "digits": PHONE_NUMBER}, "ok": True}
    reply = f"Done: {OTHER_EMAIL} was told at {PHONE}; key {API_KEY} revoked."
    declaration = {
        "type": "function",
        "function": {
            "name": "notify",
            "description": f"Ops contact {EMAIL}, on call {PHONE}",
            "parameters": {
                "type": "object",
                "title": f"Message for {EMAIL}",
                "properties": {
                    OTHER_EMAIL: {
                        "type": "object",
                        "description": f"reach {OTHER_EMAIL}",
                        "properties": {
                            "phone": {"type": "string", "enum": [PHONE], "default": PHONE},
                            "api_key": {"type": "string", "examples": [API_KEY]},
                            "dial": {"type": "integer", "maximum": 9_999_999_999},
                        },
                    },
                    "note": {"type": "string", "pattern": "^sk-proj-.*$"},
                    "cc": {"type": "array", "items": {"type": "string", "format": "email"}},
                },
                "required": [OTHER_EMAIL],
                EMAIL: "a vendor's own keyword",
            },
        },
        "replay": "non_replayable",
        "effect": "write",
        "queryable": False,
    }
    return {
        "runs": [
            {
                "id": RUN_ID,
                "run_key": RUN_KEY,
                "status": "succeeded",
                "reason": f"escalated to {EMAIL}",
                "input": {
                    "messages": [
                        {"role": "system", "content": f"Escalations go to {EMAIL}."},
                        {
                            "role": "user",
                            "content": f"I am {OTHER_EMAIL}, phone {PHONE}, my key {API_KEY}"
                            f"\n\n[crashcert-run: {RUN_KEY}]",
                        },
                    ]
                },
                "budget_iterations": 4,
                "budget_tool_calls": 4,
                "budget_tokens": 10_000,
                "attempts": 1,
                "max_attempts": 3,
            }
        ],
        "model_calls": [
            _model_call(
                0,
                {
                    "role": "assistant",
                    "content": f"writing to {EMAIL}",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "notify", "arguments": json.dumps(arguments)},
                        }
                    ],
                },
            ),
            _model_call(1, {"role": "assistant", "content": reply}),
        ],
        "tool_calls": [
            {
                "name": "notify",
                "state": "succeeded",
                "arguments": json.dumps(arguments),
                "declaration": declaration,
                "outcome": {"result": result},
            }
        ],
        "deliveries": [{"run_id": RUN_ID, "content": reply, "state": "delivered"}],
        "events": [
            {"id": 1, "kind": "run.claimed", "worker_id": "w1", "data": {}},
            {"id": 2, "kind": "tool.started", "worker_id": "w1", "data": {EMAIL: PHONE}},
            {"id": 3, "kind": "tool.succeeded", "worker_id": "w1", "data": {"result": result}},
            {"id": 4, "kind": "run.succeeded", "worker_id": "w1", "data": {"reply": reply}},
        ],
    }


def _model_call(turn: int, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "turn": turn,
        "attempt": 1,
        "state": "recorded",
        "response": json.dumps({"choices": [{"message": message}]}),
        "usage": {"prompt_tokens": 10 + turn, "completion_tokens": 5},
    }


def _leaks(text: str) -> list[str]:
    return [secret for secret in (*SECRETS, *FRAGMENTS) if secret in text]


def test_the_literal_run_really_holds_the_secrets() -> None:
    """Without --redact every secret comes through: the run exercises each position."""
    scenario = incident.scenario_from_tables(_tables())
    assert set(_leaks(incident.to_yaml(scenario))) == {*SECRETS, *FRAGMENTS}
    tool = scenario.tools[0]
    assert EMAIL in tool.description and EMAIL in json.dumps(tool.behaviour.result)
    assert OTHER_EMAIL in scenario.turns[0].tool_calls[0].arguments


def test_redacted_export_holds_no_secret_in_any_position() -> None:
    scenario = incident.scenario_from_tables(_tables(), redacted=True)
    text = incident.to_yaml(scenario)
    assert _leaks(text) == []
    # Still the same incident, in the same shape.
    assert scenario.faults == [] and scenario.expect.status == "succeeded"
    assert [len(turn.tool_calls) for turn in scenario.turns] == [1, 0]
    assert scenario.turns[-1].content is not None and "redacted" in scenario.turns[-1].content
    tool = scenario.tools[0]
    assert (tool.name, tool.replay, tool.effect) == ("notify", "non_replayable", "write")
    assert tool.description.startswith("[redacted")
    call = scenario.turns[0].tool_calls[0]
    assert (call.id, call.name) == ("call_1", "notify")
    # The arguments' keys are the schema's property names: the call still fits its tool.
    assert set(call.arguments) == set(tool.parameters["properties"])
    assert tool.parameters["required"] == [next(iter(call.arguments))]
    nested = tool.parameters["properties"][tool.parameters["required"][0]]
    assert set(nested["properties"]) == set(call.arguments[tool.parameters["required"][0]])
    assert nested["type"] == "object" and tool.parameters["type"] == "object"


def test_redacted_export_through_the_command_line(tmp_path: pathlib.Path) -> None:
    stored = history.TrialHistory(
        trial_id="t1",
        engine="reference",
        scenario=schema.parse(
            {"name": "tiny", "input": {"user": "hi"}, "turns": [{"content": "hello"}]}
        ),
        run_key=RUN_KEY,
        run_id=RUN_ID,
        engine_tables=_tables(),
    )
    artifacts.write_trial(tmp_path, stored, verdicts=[], verdict="PASS", repro="crashcert run x")
    result = click.testing.CliRunner().invoke(
        main.main, ["incident", "export", "--trial", str(tmp_path), "--redact"]
    )
    assert result.exit_code == 0, result.output
    assert _leaks(result.output) == []
    exported = schema.parse(yaml.safe_load(result.output), source="exported")
    assert exported.tools[0].name == "notify"


def test_keys_are_numbered_alike_across_one_export_and_never_hashed() -> None:
    redactor = redaction.Redactor()
    first = redactor.value({EMAIL: {"phone": PHONE}, "n": [1.5, True, None]})
    assert first == {
        "key_1": {"key_2": f"[redacted {len(PHONE)} chars]"},
        "key_3": [0.0, True, None],
    }
    assert redactor.value({"phone": 1, EMAIL: 2}) == {"key_2": 0, "key_1": 0}
    assert redaction.Redactor().value({"phone": 1}) == {"key_1": 0}  # per export
