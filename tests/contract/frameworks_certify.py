"""Certify a framework example on `refund` at a few named black-box points: what
test_openai_agents_engine.py and test_pydantic_ai_engine.py share (a full `crashcert
certify` is ci/certify_frameworks.sh)."""

from __future__ import annotations

import pathlib

import pytest

from harness.campaigns import certify
from harness.engines import commands
from harness.lab import shared
from harness.pool import autojobs
from harness.scenario import schema

HERE = pathlib.Path(__file__).resolve().parent
# A kill after the sink took the reply: a naive agent run again from its input shows every
# failure there (it asks the model, refunds and replies again). The hardened one is killed
# after each tool's effect too.
NAIVE_POINTS = ["world:reply.accepted"]
HARDENED_POINTS = ["world:tool.effect", "world:reply.accepted"]


def run(
    folder: str, name: str, points: list[str], tmp_path_factory: pytest.TempPathFactory
) -> certify.Certification:
    description = HERE / folder / f"{name}.yaml"
    with shared.open_lab(commands.load(description)) as lab:
        return certify.certify(
            lab,
            [("refund", schema.find("refund"))],
            out_dir=tmp_path_factory.mktemp(name),
            engine_ref=str(description),
            points=points,
            time_kills=0,
            jobs=autojobs.Auto(),
        )
