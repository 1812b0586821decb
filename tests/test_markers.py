"""Every test module that starts real processes carries a marker the flake hunt selects
(ci/flake_hunt.sh), so a process-starting test cannot land unhunted."""

from __future__ import annotations

import pathlib
import re
import shlex

TESTS = pathlib.Path(__file__).resolve().parent
HUNT = TESTS.parent / "ci" / "flake_hunt.sh"
STARTS_PROCESSES = re.compile(
    r"\bsubprocess\.(run|Popen|check_call|check_output)\(|processes\.Worker\(|open_lab\(|run_trial\b"
)
MARKED = re.compile(r"pytest\.mark\.(\w+)")


def hunted_markers() -> set[str]:
    text = HUNT.read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("markers=")]
    expression = shlex.split(line.partition("=")[2])[0]
    names = set(re.findall(r"\b[a-z]+\b", expression)) - {"and", "or", "not"}
    return names - {"slow", "FLAKE", "MARKERS"}


def unhunted(files: dict[str, str], hunted: set[str]) -> list[str]:
    return sorted(
        name
        for name, text in files.items()
        if STARTS_PROCESSES.search(text) and not hunted & set(MARKED.findall(text))
    )


def test_the_check_sees_an_unmarked_process_starting_module() -> None:
    files = {
        "a.py": "import subprocess\ndef test_x():\n    subprocess.run(['true'])\n",
        "b.py": "import pytest\npytestmark = pytest.mark.processes\nsubprocess.run(['true'])\n",
        "c.py": "def test_y():\n    assert 1 + 1 == 2\n",
    }
    assert unhunted(files, {"processes"}) == ["a.py"]


def test_the_hunt_selects_the_process_markers() -> None:
    assert {"postgres", "toxiproxy", "matrix", "processes"} <= hunted_markers()


def test_every_process_starting_test_module_is_hunted() -> None:
    files = {str(path.relative_to(TESTS)): path.read_text() for path in TESTS.rglob("test_*.py")}
    files.pop("test_markers.py")
    assert unhunted(files, hunted_markers()) == []
