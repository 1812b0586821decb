from __future__ import annotations

import hypothesis
import pytest

# Machines are shared: how fast an example is drawn or run says nothing about the property,
# so neither the too_slow health check nor a per-example deadline may fail a test (a cold
# import during the first draw took 1.6 s once in a fresh venv).
hypothesis.settings.register_profile(
    "shared_machine",
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
    deadline=None,
)
hypothesis.settings.load_profile("shared_machine")

pytest_plugins = [
    "tests.fix_world",
    "tests.fix_pg",
    "tests.fix_proxy",
    "tests.fix_engine",
    "tests.fix_process_state",
]


@pytest.fixture(autouse=True)
def _not_on_github(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrices tests run (some failing on purpose) must not write this CI job's step
    summary or annotate it (harness/report/github.py)."""
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
