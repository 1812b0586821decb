"""One Lab (embedded Postgres, Toxiproxy, the reference engine's template) for tests/explore."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.engines import commands
from harness.lab import shared


@pytest.fixture(scope="package")
def base_lab() -> Iterator[shared.Lab]:
    with shared.open_lab(commands.find("reference")) as lab:
        yield lab
