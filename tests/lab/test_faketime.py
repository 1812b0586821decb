"""clock_skew's clock: libfaketime preloaded, shifted at run time by its offset file.

pytestmark = pytest.mark.processes  # starts real subprocesses: the flake hunt runs it

Without a working libfaketime the tests skip saying why, unless CI=true or
CRASHCERT_REQUIRE_LIBFAKETIME=1 (then they fail): CI must prove the class."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness import errors
from harness.faults import spec
from harness.lab import faketime


@pytest.fixture(scope="module")
def library() -> str:
    try:
        return faketime.find()
    except errors.EnvironmentProblem as problem:
        if os.environ.get("CI") == "true" or os.environ.get(faketime.REQUIRE_ENV) == "1":
            pytest.fail(str(problem), pytrace=False)
        pytest.skip(str(problem))


def test_clocks_only_for_a_plan_that_skews_one() -> None:
    assert faketime.for_plan([spec.parse("kill@run.claimed#1")]) is None


def test_the_offset_is_libfakes_relative_format() -> None:
    assert [faketime.offset_text(s) for s in (-3600, 2.5, 12)] == ["-3600", "+2.5", "+12"]


def test_a_missing_library_is_refused_with_directions(monkeypatch: pytest.MonkeyPatch) -> None:
    faketime.find.cache_clear()
    monkeypatch.setenv(faketime.ENV_VAR, "/nonexistent/libfaketime.so.1")
    try:
        with pytest.raises(errors.EnvironmentProblem, match=r"pip install 'crashcert\[clock\]'"):
            faketime.find()
    finally:
        faketime.find.cache_clear()


def test_a_running_process_is_skewed_and_its_sleeps_stay_true(library: str) -> None:
    clocks = faketime.Clocks(library)
    try:
        env = {**os.environ, **clocks.env_for("w1")}
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time\n"
             "for line in sys.stdin:\n"
             "    t = time.monotonic(); time.sleep(0.01)\n"
             "    print(round(time.time()), time.monotonic() - t < 5, flush=True)\n"],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert child.stdin is not None and child.stdout is not None

        def ask() -> tuple[float, bool]:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write("?\n")
            child.stdin.flush()
            now, slept = child.stdout.readline().split()
            return float(now) - time.time(), slept == "True"

        before, slept = ask()
        assert abs(before) < 60 and slept
        assert clocks.skew("w1", -3600)
        after, slept = ask()
        assert -3700 < after < -3500 and slept
        assert not clocks.skew("w9", 5)  # a worker without our preload
        child.stdin.close()
        assert child.wait(30) == 0
    finally:
        clocks.close()


def test_a_campaign_without_the_library_is_refused_up_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--faults clock_skew` with no working libfaketime: one error before any trial."""
    faketime.find.cache_clear()
    monkeypatch.setenv(faketime.ENV_VAR, "/nonexistent/libfaketime.so.1")
    try:
        assert faketime.require(["kill", "tool_cut"]) is None  # nothing to skew: no probe
        with pytest.raises(errors.EnvironmentProblem, match="clock_skew needs libfaketime"):
            faketime.require(["kill", "clock_skew"])
    finally:
        faketime.find.cache_clear()


def test_a_campaign_names_the_library_it_found(library: str) -> None:
    assert faketime.require(["clock_skew"]) == f"clock_skew: libfaketime {library}"


def test_the_gil_handoff_is_left_alone() -> None:
    """libfaketime's pthread_cond_timedwait "monotonic fix" slows every timed handoff of the
    GIL (a heartbeat thread then misses its lease): it is turned off."""
    assert faketime.environment("lib.so", "offset")["FAKETIME_FORCE_MONOTONIC_FIX"] == "0"
