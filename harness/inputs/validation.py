"""Reading user files at the edge: YAML in, a pydantic model out, or one clear error that
names the file, the field and the problem.

A scenario or engine file is small and written by hand, so reading one is bounded: at most
MAX_YAML_BYTES of a regular file, UTF-8, no anchors or aliases (a few lines of aliases
expand to billions of nodes once anything walks the data), at most MAX_YAML_NODES nodes
nested at most MAX_YAML_DEPTH deep. Every refusal is one line.
"""

from __future__ import annotations

import datetime
import math
import pathlib
import re
from collections.abc import Callable
from typing import Any, TypeVar

import pydantic
import yaml

from harness import errors
from harness.inputs import readers

Model = TypeVar("Model", bound=pydantic.BaseModel)

# The bundled scenarios are about 2 KB and 200 nodes; a hundredfold is still hand-written.
MAX_YAML_BYTES = 1024 * 1024
# Without aliases every node costs bytes of text; this bounds parsing time (the pure-Python
# composer takes about a second per 30,000 nodes) and all work on the data afterwards.
MAX_YAML_NODES = 20_000
# JSON schemas and tool results nest a few levels; deeper is a mistake or an attack
# (and PyYAML's composer recurses per level).
MAX_YAML_DEPTH = 64
# Integers every JSON reader takes exactly (I-JSON, RFC 7493: IEEE doubles).
MAX_JSON_INT = 2**53 - 1
NUL_REASON = "Postgres text cannot store it"

WRITE_OUT = "write the value out in full"


def describe(error: pydantic.ValidationError) -> str:
    """`field.sub: problem; other: problem` — the fields as the user wrote them, the first
    few. A key that is no field name is not echoed: the file may not be a crashcert file
    at all (`scenarios validate /etc/shadow`), and its lines are not ours to print."""
    items = error.errors()
    shown = [
        f"{'.'.join(_loc_part(part) for part in item['loc']) or '(top level)'}: {item['msg']}"
        for item in items[:_MAX_PROBLEMS]
    ]
    more = len(items) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


_MAX_PROBLEMS = 5
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.=-]{0,63}|\[key\]")


def _loc_part(part: object) -> str:
    if isinstance(part, str) and not _FIELD_NAME.fullmatch(part):
        return "(a key that is no field name, not shown)"
    return str(part)


def read_yaml(path: pathlib.Path, *, what: str) -> Any:
    text = _read_text(path, what=what)
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, bounded
    except _Refused as error:
        raise errors.CrashcertError(f"{path}: {_where(error)}{error.problem}") from None
    except yaml.YAMLError as error:
        raise errors.CrashcertError(f"{path}: not valid YAML: {_one_line(error)}") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise errors.CrashcertError(f"{path}: not valid YAML: {error}") from None
    problem = _type_problem(data, "")
    if problem:
        raise errors.CrashcertError(f"{path}: invalid {what}: {problem}")
    return data


def _read_text(path: pathlib.Path, *, what: str) -> str:
    """The file's text, refusing anything that is not a small regular UTF-8 file."""
    return readers.read_text(path, what=what, max_bytes=MAX_YAML_BYTES)


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a crashcert file may not use."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases and bounds node count and depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            self._refuse(f"YAML aliases (*{event.anchor}) are not allowed; {WRITE_OUT}", event)
        if getattr(event, "anchor", None) is not None:
            self._refuse(f"YAML anchors (&{event.anchor}) are not allowed; {WRITE_OUT}", event)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            self._refuse(f"more than {MAX_YAML_NODES} YAML nodes", event)
        if self._depth >= MAX_YAML_DEPTH:
            self._refuse(f"nested deeper than {MAX_YAML_DEPTH} levels", event)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        # PyYAML keeps the last of two equal keys: one of the author's values vanishes
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = (key_node.tag, key_node.value)
                if key in seen:
                    where = key_node.start_mark
                    raise _Refused(
                        problem=f"the key {key_node.value[:64]!r} appears twice in one mapping",
                        problem_mark=where,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def _refuse(self, problem: str, event: Any) -> None:
        raise _Refused(problem=problem, problem_mark=event.start_mark)


def _where(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def _one_line(error: yaml.YAMLError) -> str:
    """PyYAML spreads a message over lines with a snippet; the CLI prints one line."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        return _where(error) + " ".join(error.problem.split())
    if isinstance(error, yaml.reader.ReaderError) and isinstance(error.character, int):
        return f"character #x{error.character:04x} at offset {error.position}: {error.reason}"
    return " ".join(str(error).split())


def check_json(value: Any) -> Any:
    """Free-form data (tool arguments, results, schemas) that reaches the engine and Postgres:
    no NUL character (Postgres text and jsonb cannot store one), finite numbers, integers
    every JSON reader takes exactly. Raises ValueError naming where the problem is."""
    problem = _type_problem(value, "") or _json_problem(value, "")
    if problem:
        raise ValueError(problem)
    return value


# What SafeLoader makes of YAML that JSON cannot say: `!!binary`, `!!set`, `!!omap` and
# `!!pairs` tags, and unquoted dates and times (`2024-01-01`, YAML 1.1 timestamps).
_NOT_JSON = (
    (bytes, "binary data (a YAML !!binary)"),
    (datetime.datetime, "a timestamp (YAML reads an unquoted date and time as one)"),
    (datetime.date, "a date (YAML reads an unquoted 2024-01-01 as one)"),
    (set, "a set (a YAML !!set)"),
    (tuple, "a tuple"),
)
QUOTE_IT = "JSON types only: quote it to keep it a string"


def _first_problem(
    value: Any,
    at: str,
    node: Callable[[Any, str], str | None],
    key: Callable[[Any, str], str | None],
) -> str | None:
    """The first problem `node` (a value) or `key` (a mapping key) finds, depth first, named
    by where it is: `tools[0].behaviour.result`."""
    problem = node(value, at)
    if problem:
        return problem
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = _first_problem(item, f"{at}[{index}]", node, key)
            if problem:
                return problem
    elif isinstance(value, dict):
        for name, item in value.items():
            problem = key(name, at) or _first_problem(
                item, f"{at}.{name}" if at else str(name), node, key
            )
            if problem:
                return problem
    return None


def _not_json_type(value: Any, at: str) -> str | None:
    where = at or "(top level)"
    for kind, name in _NOT_JSON:
        if isinstance(value, kind):
            return f"{where}: {name}; {QUOTE_IT}"
    if value is not None and not isinstance(value, (str, int, float, list, dict)):
        return f"{where}: {type(value).__name__} is not a JSON type"
    return None


def _not_string_key(name: Any, at: str) -> str | None:
    if isinstance(name, str):
        return None
    shown = " ".join(str(name).split())[:40]
    return (
        f"{at or '(top level)'}: the key {shown} is {type(name).__name__}, not a string; "
        "mapping keys must be strings (quote it)"
    )


def _type_problem(value: Any, at: str) -> str | None:
    """The first value that is not a JSON type (string, number, boolean, null, array,
    object with string keys)."""
    return _first_problem(value, at, _not_json_type, _not_string_key)


def _not_portable(value: Any, at: str) -> str | None:
    where = f" at {at}" if at else ""
    if isinstance(value, str):
        if "\0" in value:
            return f"a NUL character{where}: {NUL_REASON}"
        return _surrogate(value, where)
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_JSON_INT:
        return f"integer{where} beyond ±(2^53 - 1): not every JSON reader takes it exactly"
    if isinstance(value, float) and not math.isfinite(value):
        return f"number{where} is {value}: JSON has no infinity or NaN"
    return None


def _nul_in_key(name: Any, at: str) -> str | None:
    if isinstance(name, str) and "\0" in name:
        return f"a NUL character in a key{' at ' + at if at else ''}: {NUL_REASON}"
    return None


def _json_problem(value: Any, at: str) -> str | None:
    return _first_problem(value, at, _not_portable, _nul_in_key)


def check_text(value: str) -> str:
    """A string that reaches the engine or Postgres: no NUL character, UTF-8 encodable."""
    if "\0" in value:
        index = value.index("\0")
        raise ValueError(f"contains a NUL character (\\0) at index {index}: {NUL_REASON}")
    problem = _surrogate(value, "")
    if problem:
        raise ValueError(problem)
    return value


def _surrogate(value: str, where: str) -> str | None:
    """A lone surrogate (YAML's "\\ud800") is no character: it cannot be written as UTF-8,
    so it would crash whatever first sends or stores it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"a lone surrogate (U+{ord(value[error.start]):04X}){where}: not a character"
    return None


def parse(model: type[Model], data: Any, *, source: str, what: str) -> Model:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        raise errors.CrashcertError(f"{source}: invalid {what}: {describe(error)}") from None
