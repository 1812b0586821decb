"""One Lab (embedded Postgres, Toxiproxy, the reference engine's template) for tests/explore."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.contract.engines import commands
from harness.lab import shared as lab_module


@pytest.fixture(scope="package")
def base_lab() -> Iterator[lab_module.Lab]:
    with lab_module.open_lab(commands.find("reference")) as lab:
        yield lab
