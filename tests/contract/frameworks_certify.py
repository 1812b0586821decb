"""Certify a framework example on `refund` at a few named black-box points: what
test_openai_agents_engine.py and test_pydantic_ai_engine.py share (a full `crashcert
certify` is ci/certify_frameworks.sh)."""

from __future__ import annotations

import pathlib

import pytest

from harness.campaigns import certify
from harness.engines import commands
from harness.lab import shared
from harness.scenario import schema

HERE = pathlib.Path(__file__).resolve().parent
# A kill after the refund's effect, and after the sink took the reply.
POINTS = ["world:tool.effect", "world:reply.accepted"]


def run(folder: str, name: str, tmp_path_factory: pytest.TempPathFactory) -> certify.Certification:
    description = HERE / folder / f"{name}.yaml"
    with shared.open_lab(commands.load(description)) as lab:
        return certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=tmp_path_factory.mktemp(name),
            engine_ref=str(description),
            points=POINTS,
            time_kills=0,
            jobs=2,
        )
