"""`crashcert explore`: input checked before any Lab opens; the summary reads like Hypothesis's."""

from __future__ import annotations

import json
import pathlib

import click.testing
import pytest

from harness import errors
from harness.campaigns import explore
from harness.checkers import verdict
from harness.cli import main
from harness.faults import spec


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "kill,explode"], "unknown fault classes"),
        (["--points", "tools.pending,nowhere"], "unknown points"),
        (["--scenario", "no_such_scenario"], "unknown scenario"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(args: list[str], message: str) -> None:
    argv = ["explore", "--scenario", "refund", *args]
    result = click.testing.CliRunner().invoke(main.main, argv)
    assert isinstance(result.exception, errors.CrashcertError)
    assert message in str(result.exception)


def failure(status: explore.Status, *, replays_fail: bool) -> explore.ExploreResult:
    failed = explore.Observation(verdict.Verdict.FAIL, ("tool.at_most_once",))
    passed = explore.Observation(verdict.Verdict.PASS, ())
    steps = [spec.FaultStep(action="kill", point="tool.returned", occurrence=2)]
    return explore.ExploreResult(
        seed=7,
        candidates=55,
        examples=4,
        shrinks=3,
        replays=2,
        verdicts={"PASS": 5, "FAIL": 4},
        failure=explore.Failure(
            schedule=steps,
            invariants=("tool.at_most_once",),
            found=[*steps, spec.FaultStep(action="pause", point="reply.sent")],
            replays=[failed if replays_fail else passed] * 2,
            status=status,
            repro="crashcert run --engine e.yaml --scenario refund "
            "--fault 'kill@tool.returned#2' --seed 7",
            schedule_file=pathlib.Path("out/refund.minimal.yaml"),
            engine_ref="e.yaml",
        ),
    )


def test_a_reproducible_failure_prints_both_reproductions() -> None:
    result = failure(explore.Status.REPRODUCIBLE, replays_fail=True)
    text = "\n".join(explore.render(result))
    assert "seed 7: 4 schedules over 55 points, 3 shrink and 2 replay trials" in text
    assert "Falsifying schedule (1 fault(s), failing tool.at_most_once; failed 2 of 2" in text
    assert "--fault 'kill@tool.returned#2' --seed 7" in text
    assert "crashcert run --engine e.yaml --scenario out/refund.minimal.yaml" in text
    assert result.exit_code == 1
    summary = explore.summary(result)
    assert json.loads(json.dumps(summary))["failure"]["schedule"] == ["kill@tool.returned#2"]


def test_a_flaky_failure_says_so_and_is_no_pass() -> None:
    result = failure(explore.Status.FLAKY, replays_fail=False)
    text = "\n".join(explore.render(result))
    assert "FLAKY schedule" in text and "not a pass" in text
    assert result.exit_code == 2
