"""A tool's arguments against its declared `parameters`, for a tool scripted to refuse bad
arguments (`behaviour.reject_invalid_arguments`): the JSON Schema keywords scenarios use
(`type`, `properties`, `required`, `additionalProperties: false`, `enum`, `items`). Other
keywords are not judged: a service refuses only what it is sure is wrong.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _kind(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _is(expected: str, value: Any) -> bool:
    kind = _kind(value)
    if expected == "number":
        return kind in ("integer", "number")
    return kind == expected


def problems(schema: Any, value: Any, where: str = "") -> list[str]:
    """Why `value` does not match `schema`, one line each (`loc: message`); empty if it does."""
    if not isinstance(schema, dict):
        return []
    at = where or "arguments"
    expected = schema.get("type")
    types = [expected] if isinstance(expected, str) else expected
    if isinstance(types, list) and types and not any(_is(t, value) for t in types):
        return [f"{at}: expected {' or '.join(types)}, got {_kind(value)}"]
    found: list[str] = []
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        found.append(f"{at}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                found.append(f"{_join(where, name)}: field required")
        for name, item in value.items():
            if name in properties:
                found.extend(problems(properties[name], item, _join(where, name)))
            elif schema.get("additionalProperties") is False:
                found.append(f"{_join(where, name)}: extra field not permitted")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found.extend(problems(schema["items"], item, f"{at}[{index}]"))
    return found


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
