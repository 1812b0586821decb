"""The pytest process's own state must come out of every test as it went in.

Children inherit the umask: once a race in the control server left it at 0177, and every
later Chromium started by the suite died with SIGTRAP (its profile directories became
untraversable). Checked after each test, so a leak is blamed on the test that made it.

The lab's isolation state is process-wide too: a test that runs the CLI in-process with
`--isolation off` would otherwise make every later rerun line say `--isolation off`.
"""

from __future__ import annotations

import collections.abc

import pytest

from harness.lab import isolation


def current_umask() -> int:
    """Read without setting it (os.umask can only set, which would race other threads)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    raise RuntimeError("no Umask line in /proc/self/status")


@pytest.fixture(autouse=True)
def _umask_unchanged() -> collections.abc.Iterator[None]:
    before = current_umask()
    yield
    after = current_umask()
    assert after == before, f"the test left the process umask at {after:04o} (was {before:04o})"


@pytest.fixture(autouse=True)
def _isolation_state_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test's in-process CLI call decides is undone after it (monkeypatch)."""
    monkeypatch.setattr(isolation, "_state", isolation.current())
