"""Which tests did not give the same outcome in every run: ci/flake_hunt.sh's verdict.

    python ci/flake_outcomes.py [--labels quiet,hogs,quiet] RUN1.xml RUN2.xml ...

Each file is one pytest run's `--junitxml`. A test's outcome in a run is passed, failed,
error, skipped, xfailed, or absent (not in that run at all, or the run left no file: a
test that hangs or kills pytest is as unstable as one that fails once). Prints each
unstable test with its outcome per run, each test that failed in every run, then
"N tests, M unstable". Exit 1: some test unstable; 2: none unstable but some failed or
errored every run; 0: every test gave the same passing outcome every time.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence

ABSENT = "absent"
# When one run reports a test twice (a teardown error after its call), the worse counts.
RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}
BAD = ("failed", "error")


def outcomes(path: pathlib.Path) -> dict[str, str]:
    """Test id (`classname::name`) -> outcome in the run `path` records; {} if none."""
    if not path.exists():
        return {}
    found: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = _outcome(case)
        if test not in found or RANK[outcome] > RANK[found[test]]:
            found[test] = outcome
    return found


def _outcome(case: ET.Element) -> str:
    if case.find("error") is not None:
        return "error"
    if case.find("failure") is not None:
        return "failed"
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def compare(runs: Sequence[dict[str, str]]) -> dict[str, list[str]]:
    """Every test seen in any run -> its outcome in each run, in the runs' order."""
    tests = sorted({test for run in runs for test in run})
    return {test: [run.get(test, ABSENT) for run in runs] for test in tests}


def unstable(table: dict[str, list[str]]) -> list[str]:
    return [test for test, seen in table.items() if len(set(seen)) > 1]


def always_bad(table: dict[str, list[str]]) -> list[str]:
    return [test for test, seen in table.items() if len(set(seen)) == 1 and seen[0] in BAD]


def report(table: dict[str, list[str]], labels: Sequence[str]) -> tuple[list[str], int]:
    """The lines to print and the exit code."""
    lines = []
    moving, broken = unstable(table), always_bad(table)
    for test in moving:
        per_run = ", ".join(f"{o} ({label})" for o, label in zip(table[test], labels, strict=True))
        lines.append(f"UNSTABLE {test}: {per_run}")
    lines += [f"{table[test][0].upper()} every run: {test}" for test in broken]
    lines.append(f"{len(table)} tests, {len(moving)} unstable")
    return lines, 1 if moving else 2 if broken else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="one JUnit XML per run")
    parser.add_argument("--labels", default="", help="comma-separated, one per run")
    args = parser.parse_args(argv)
    labels = args.labels.split(",") if args.labels else []
    labels = labels[: len(args.runs)]
    labels += [f"run {i}" for i in range(len(labels) + 1, len(args.runs) + 1)]
    lines, code = report(compare([outcomes(path) for path in args.runs]), labels)
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
