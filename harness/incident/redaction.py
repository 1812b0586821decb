"""Same shape, none of the content: what `crashcert incident export --redact` leaves of a run.

Every string becomes `[redacted N chars]`, every number 0; booleans and nulls stay, as do
lists and objects with their lengths. Object keys are content too (an e-mail address can be
a key), so each distinct key becomes `key_N`, numbered in order of first sight and the same
everywhere in one export: a tool call's arguments still match its parameter schema. Keys
are numbered, never hashed: a hash of an e-mail address or phone number is easily reversed
by trying candidates.

A tool's JSON schema keeps its structure (types, nesting, numeric limits) and loses its
text: descriptions, titles, enums, defaults, examples, patterns, and its property names.
"""

from __future__ import annotations

from typing import Any

KEY_PREFIX = "key_"
# Keywords whose value is a map from property names (content) to subschemas.
_NAMED_SUBSCHEMAS = frozenset(
    {"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"}
)
# Keywords whose value is a subschema or a list of subschemas.
_SUBSCHEMAS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "anyOf",
        "oneOf",
        "allOf",
    }
)
# Keywords whose value is a number or a boolean that only bounds the shape.
_LIMITS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
        "nullable",
    }
)
# Keywords kept by name whose values are text or examples (content).
_KNOWN_TEXT = frozenset(
    {
        "description",
        "title",
        "enum",
        "const",
        "default",
        "examples",
        "pattern",
        "format",
        "$ref",
        "$id",
        "$schema",
        "$comment",
        "dependentRequired",
        "contentMediaType",
        "contentEncoding",
    }
)
_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


class Redactor:
    """One per export: the numbering of keys must be shared by all that export redacts."""

    def __init__(self) -> None:
        self._keys: dict[str, str] = {}

    def key(self, name: str) -> str:
        if name not in self._keys:
            self._keys[name] = f"{KEY_PREFIX}{len(self._keys) + 1}"
        return self._keys[name]

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return f"[redacted {len(value)} chars]"
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            return 0
        if isinstance(value, float):
            return 0.0
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.key(str(key)): self.value(item) for key, item in value.items()}
        return self.value(str(value))  # anything else is content of unknown shape

    def schema(self, schema: Any) -> Any:
        """A JSON schema's structure, with its text and property names redacted."""
        if isinstance(schema, list):
            return [self.schema(item) for item in schema]
        if not isinstance(schema, dict):
            return schema if isinstance(schema, bool) else self.value(schema)
        kept: dict[str, Any] = {}
        for keyword, item in schema.items():
            if keyword in _NAMED_SUBSCHEMAS and isinstance(item, dict):
                kept[keyword] = {self.key(str(name)): self.schema(s) for name, s in item.items()}
            elif keyword in _SUBSCHEMAS:
                kept[keyword] = self.schema(item)
            elif keyword == "required" and isinstance(item, list):
                kept[keyword] = [self.key(str(name)) for name in item]
            elif keyword == "type" and _is_type(item):
                kept[keyword] = item
            elif keyword in _LIMITS and isinstance(item, int | float):
                kept[keyword] = item
            elif keyword in _KNOWN_TEXT:
                kept[keyword] = self.value(item)
            else:  # not a keyword we know: its name may be content as well
                kept[self.key(keyword)] = self.value(item)
        return kept


def _is_type(item: Any) -> bool:
    names = item if isinstance(item, list) else [item]
    return all(isinstance(name, str) and name in _TYPES for name in names)
