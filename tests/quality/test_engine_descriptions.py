"""The broken engines start their workers as the reference engine's do: forked from the warm
server the reference lab already runs. One that asks for other preloads gets no fork server
(shared.Lab.with_engine) and execs Python for every worker, ~0.5 s of CPU each: 42 of them
did so from the day the reference engine's preload became reference_engine.preload, and the
quality modules' trials paid it unseen."""

from __future__ import annotations

import pathlib
import types

import pytest

from harness.engines import commands
from harness.lab import shared, spawner

ENGINES = pathlib.Path(__file__).resolve().parent / "engines"
DESCRIPTIONS = sorted(ENGINES.glob("*.yaml"))


@pytest.mark.parametrize("description", DESCRIPTIONS, ids=[path.stem for path in DESCRIPTIONS])
def test_a_broken_engine_forks_from_the_reference_labs_server(description: pathlib.Path) -> None:
    reference = commands.find("reference")
    # What with_engine reads of the server: the interpreter it runs under.
    server = types.SimpleNamespace(python=spawner.interpreter(reference.worker_command()))
    lab = shared.Lab(
        pg=None,  # type: ignore[arg-type]
        engine=reference,
        template="unused",
        toxiproxy=None,
        toxiproxy_note="",
        forkserver=server,  # type: ignore[arg-type]
    )
    engine = commands.load(description)
    assert engine.preload, f"{description.name} names no preload: its workers exec Python"
    assert lab.with_engine(engine).forkserver is server, (
        f"{description.name} preloads {list(engine.preload)}, the reference lab's server "
        f"{list(reference.preload)}: its workers would exec Python"
    )
