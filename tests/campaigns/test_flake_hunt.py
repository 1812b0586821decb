"""ci/flake_hunt.sh and its parser: a test whose outcome differs between runs is named with
its outcome per run, one that fails every time is named apart, and the exit code says which;
the script's hogs are ended by PID."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from ci import flake_outcomes

HUNT = pathlib.Path(__file__).parents[2] / "ci" / "flake_hunt.sh"


def junit(path: pathlib.Path, *cases: str) -> pathlib.Path:
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )
    return path


def case(name: str, inner: str = "") -> str:
    return f'<testcase classname="tests.x.test_y" name="{name}" time="0.1">{inner}</testcase>'


FAIL = '<failure message="assert 0">boom</failure>'
ERROR = '<error message="fixture broke">boom</error>'
SKIP = '<skipped type="pytest.skip" message="no docker">skip</skipped>'
XFAIL = '<skipped type="pytest.xfail" message="known">x</skipped>'


def test_outcomes_of_one_run(tmp_path: pathlib.Path) -> None:
    path = junit(
        tmp_path / "r.xml",
        case("test_pass"),
        case("test_fail", FAIL),
        case("test_error", ERROR),
        case("test_skip", SKIP),
        case("test_xfail", XFAIL),
        case("test_teardown"),
        case("test_teardown", ERROR),  # its teardown broke after it passed: an error
    )
    assert flake_outcomes.outcomes(path) == {
        "tests.x.test_y::test_pass": "passed",
        "tests.x.test_y::test_fail": "failed",
        "tests.x.test_y::test_error": "error",
        "tests.x.test_y::test_skip": "skipped",
        "tests.x.test_y::test_xfail": "xfailed",
        "tests.x.test_y::test_teardown": "error",
    }
    assert flake_outcomes.outcomes(tmp_path / "missing.xml") == {}


def test_unstable_tests_are_named_with_each_runs_outcome(tmp_path: pathlib.Path, capsys) -> None:
    runs = [
        junit(tmp_path / "1.xml", case("test_a"), case("test_b"), case("test_c", FAIL)),
        junit(tmp_path / "2.xml", case("test_a"), case("test_b", FAIL), case("test_c", FAIL)),
        junit(tmp_path / "3.xml", case("test_a"), case("test_c", FAIL)),
    ]
    code = flake_outcomes.main(["--labels", "quiet,hogs,quiet", *map(str, runs)])
    assert capsys.readouterr().out.splitlines() == [
        "UNSTABLE tests.x.test_y::test_b: passed (quiet), failed (hogs), absent (quiet)",
        "FAILED every run: tests.x.test_y::test_c",
        "3 tests, 1 unstable",
    ]
    assert code == 1


def test_exit_codes_stable_passing_and_stable_failing(tmp_path: pathlib.Path, capsys) -> None:
    good = [junit(tmp_path / f"{i}.xml", case("test_a"), case("test_s", SKIP)) for i in (1, 2)]
    assert flake_outcomes.main(list(map(str, good))) == 0
    assert capsys.readouterr().out.splitlines() == ["2 tests, 0 unstable"]
    bad = [junit(tmp_path / f"b{i}.xml", case("test_a", ERROR)) for i in (1, 2)]
    assert flake_outcomes.main(list(map(str, bad))) == 2
    assert capsys.readouterr().out.splitlines()[0] == "ERROR every run: tests.x.test_y::test_a"


def test_a_run_that_left_no_file_makes_every_test_unstable(tmp_path: pathlib.Path) -> None:
    table = flake_outcomes.compare(
        [flake_outcomes.outcomes(junit(tmp_path / "1.xml", case("test_a"))), {}]
    )
    assert flake_outcomes.unstable(table) == ["tests.x.test_y::test_a"]


FAKE_TESTS = """
import pathlib, pytest

COUNTER = pathlib.Path(__file__).with_name("calls")

@pytest.mark.postgres
def test_stable():
    pass

@pytest.mark.postgres
def test_second_run_fails():
    calls = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(calls))
    assert calls != 2

@pytest.mark.matrix
def test_always_fails():
    assert False

def test_unmarked_is_not_hunted():
    assert False
"""


def test_the_script_finds_the_test_that_failed_once_and_ends_its_hogs(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    postgres\n    matrix\n")
    (tmp_path / "test_fake.py").write_text(FAKE_TESTS)
    env = {**os.environ, "PYTHON": sys.executable, "FLAKE_OUT": str(tmp_path / "out")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the fake tests need no plugin: faster
    done = subprocess.run(
        ["bash", str(HUNT), str(tmp_path / "test_fake.py")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert lines[-3:] == [
        "UNSTABLE test_fake::test_second_run_fails: passed (quiet), failed (hogs), passed (quiet)",
        "FAILED every run: test_fake::test_always_fails",
        "3 tests, 1 unstable",
    ]
    [hog_line] = [line for line in lines if "hog pids" in line]
    assert hog_line.startswith("run 2/3 (hogs, hog pids ")
    pids = [int(p) for p in hog_line.split("hog pids ")[1].split(")")[0].split()]
    assert len(pids) == 2
    for pid in pids:  # ended and reaped by the script: no such process now
        assert not pathlib.Path(f"/proc/{pid}").exists() or _is_other(pid)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        f"run{i}.{ext}" for i in (1, 2, 3) for ext in ("log", "xml")
    ]


def _is_other(pid: int) -> bool:
    """The PID was reused by an unrelated process (not a hog's `sh -c` or `timeout`)."""
    command = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    return b"while :; do :; done" not in command
