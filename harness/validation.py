"""Reading user files at the edge: YAML in, a pydantic model out, or one clear error that
names the file, the field and the problem."""

from __future__ import annotations

import pathlib
from typing import Any, TypeVar

import pydantic
import yaml

from harness import errors

Model = TypeVar("Model", bound=pydantic.BaseModel)


def describe(error: pydantic.ValidationError) -> str:
    """`field.sub: problem; other: problem` — the fields as the user wrote them."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or '(top level)'}: {item['msg']}"
        for item in error.errors()
    )


def read_yaml(path: pathlib.Path, *, what: str) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as error:
        raise errors.CrashcertError(f"{path}: cannot read {what}: {error}") from None
    except yaml.YAMLError as error:
        raise errors.CrashcertError(f"{path}: not valid YAML: {error}") from None


def parse(model: type[Model], data: Any, *, source: str, what: str) -> Model:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        raise errors.CrashcertError(f"{source}: invalid {what}: {describe(error)}") from None
