"""The broken engines start their workers as the reference engine's do: forked from the warm
server the reference lab runs. One whose preloads that server never imported gets no fork
server (shared.Lab.with_engine) and execs Python for every worker, ~0.5 s of CPU each: 42 of
them did so from the day the reference engine's preload became reference_engine.preload
until with_engine counted the modules a preload imports, and the quality modules' trials
paid it unseen."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from harness.engines import commands
from harness.lab import shared, spawner
from tests import fix_engine

pytestmark = pytest.mark.processes  # the reference engine's real fork server

ENGINES = pathlib.Path(__file__).resolve().parent / "engines"
DESCRIPTIONS = sorted(ENGINES.glob("*.yaml"))


@pytest.fixture(scope="module")
def reference_lab() -> Iterator[shared.Lab]:
    """The reference engine with its fork server, as open_lab starts it (no Postgres)."""
    reference = commands.find("reference")
    server = shared._start_forkserver(reference)
    assert server is not None, "the reference engine's preload does not import"
    try:
        yield fix_engine.lab_of(reference, server)
    finally:
        server.close()


@pytest.mark.parametrize("description", DESCRIPTIONS, ids=[path.stem for path in DESCRIPTIONS])
def test_a_broken_engine_forks_from_the_reference_labs_server(
    reference_lab: shared.Lab, description: pathlib.Path
) -> None:
    engine = commands.load(description)
    assert engine.preload, f"{description.name} names no preload: its workers exec Python"
    server = reference_lab.forkserver
    assert isinstance(server, spawner.ForkServer)
    assert reference_lab.with_engine(engine).forkserver is server, (
        f"{description.name} preloads {list(engine.preload)}, which the reference lab's "
        f"server ({list(reference_lab.engine.preload)}) never imported: its workers exec"
    )
