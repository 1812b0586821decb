"""The pytest plugin: a team's test expands into crash-matrix cases and fails with reruns."""

from __future__ import annotations

import pathlib

import pytest

from harness.lab import toxiproxy_server

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.matrix, pytest.mark.postgres]
ROOT = pathlib.Path(__file__).resolve().parents[2]
# Read before pytester gives the inner session a HOME of its own.
TOXIPROXY_CACHE = str(toxiproxy_server.cache_dir())

TEAM_TEST = """
import pytest

@pytest.mark.crashcert(engine={engine!r}, scenarios=["sink_no_query"], points={points!r})
def test_crash_matrix(crashcert_case):
    crashcert_case.check()
"""


def _run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    points: list[str],
    *extra: str,
) -> pytest.RunResult:
    # pytester gives the inner session its own HOME: point it at our Toxiproxy cache.
    monkeypatch.setenv("CRASHCERT_CACHE", TOXIPROXY_CACHE)
    pytester.makepyfile(test_team=TEAM_TEST.format(engine=engine, points=points))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", *extra, timeout=600)


def test_a_broken_engine_fails_with_its_rerun_command(pytester, monkeypatch):
    engine = str(ROOT / "tests" / "quality" / "engines" / "resend_reply.yaml")
    result = _run(pytester, monkeypatch, engine, ["reply.sent"])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*reply.single_delivery*", "*rerun: crashcert run --engine*"])


def test_the_cases_run_under_pytest_xdist(pytester, monkeypatch):
    pytest.importorskip("xdist")
    # each xdist worker opens its own lab; which worker gets which case is xdist's choice
    # (one worker may take all three while the other still starts), so no split is asserted
    result = _run(
        pytester,
        monkeypatch,
        "reference",
        ["reply.sent", "tool.started", "reply.sending"],
        "-n",
        "2",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    result.stdout.fnmatch_lines(["[[]gw?[]]*PASSED*"])
    result.stdout.fnmatch_lines(["*PASSED*test_crash_matrix?sink_no_query-reply.sent?*"])
