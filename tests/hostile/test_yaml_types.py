"""Scenarios and engine descriptions hold JSON types only, with string keys (issue 33): YAML's
`!!set`, `!!binary`, `!!omap`, timestamps and non-string mapping keys are refused when the
file is read, by an error that names the field, instead of crashing the world or a checker
mid-trial."""

from __future__ import annotations

import datetime
import pathlib

import pytest

from harness import errors
from harness.inputs import validation
from harness.scenario import schema
from tests.hostile import inputs


@pytest.mark.parametrize("name", list(inputs.NOT_JSON))
def test_a_scenario_with_yaml_beyond_json_is_refused_naming_the_field(
    name: str, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(inputs.tagged(*inputs.NOT_JSON[name]))
    with pytest.raises(errors.CrashcertError) as raised:
        schema.load(path)
    message = str(raised.value)
    assert "\n" not in message
    assert "JSON types only" in message or "keys must be strings" in message, message
    # The field at fault, as the user wrote it.
    field = "input.user" if "input" in name else "turns[0].tool_calls[0].arguments"
    if "result" in name or "key" in name:
        field = "tools[0].behaviour.result"
    assert field in message, message


def test_the_unchanged_scenario_loads(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(inputs.scenario())
    assert schema.load(path).name == "hostile"


@pytest.mark.parametrize(
    "value,problem",
    [
        ({"a": b"x"}, "a: binary data"),
        ({"a": [1, {2: "x"}]}, "a[1]: the key 2 is int"),
        ({"a": {datetime.date(2024, 1, 1): 1}}, "a: the key 2024-01-01 is date"),
        ({"a": {"b": datetime.datetime(2024, 1, 1)}}, "a.b: a timestamp"),
        ({"a": {1, 2}}, "a: a set"),
        ({"a": object()}, "a: object is not a JSON type"),
    ],
)
def test_free_form_data_built_in_code_is_held_to_json_types_too(
    value: object, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        validation.check_json(value)


def test_json_values_pass_unchanged() -> None:
    value = {"a": [1, 2.5, "x", True, None, {"b": []}]}
    assert validation.check_json(value) is value
