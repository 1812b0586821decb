"""Every hostile input of tests/hostile/catalog.py ends as it must (refused clearly, or
accepted correctly), in bounded time, with no traceback, leak or internal error."""

from __future__ import annotations

import pathlib

import pytest

from tests.hostile import catalog, forked, inputs

# Each case forks a child of this interpreter; one runs the installed script.
pytestmark = pytest.mark.processes

_NAMES = [case.name for case in catalog.CASES]


def test_every_case_has_a_name_of_its_own() -> None:
    assert len(set(_NAMES)) == len(_NAMES), [n for n in _NAMES if _NAMES.count(n) > 1]


@pytest.mark.parametrize("case", catalog.CASES, ids=_NAMES)
def test_ends_as_it_must(case: inputs.Case, tmp_path: pathlib.Path) -> None:
    outcome = forked.run(case, tmp_path)
    wanted = {
        inputs.REFUSED: {inputs.CLEAR},
        inputs.OK: {inputs.ACCEPTED},
        inputs.EITHER: {inputs.CLEAR, inputs.ACCEPTED},
    }[case.expect]
    assert outcome.outcome_class in wanted, (outcome.exit_code, outcome.output[-3000:])


def test_the_forked_runner_sees_what_a_shell_sees(tmp_path: pathlib.Path) -> None:
    """One case both ways: the fork is the real entry point, not a stand-in."""
    case = catalog.CASES[0]
    forked_outcome = forked.run(case, tmp_path / "fork")
    process = forked.run_process(case, tmp_path / "process")
    assert forked_outcome.exit_code == process.exit_code
    last = [o.output.strip().splitlines()[-1] for o in (forked_outcome, process)]
    assert last[0].replace("/fork/", "/") == last[1].replace("/process/", "/")


def test_the_classes_are_counted_honestly(tmp_path: pathlib.Path) -> None:
    """A fine input claimed to be refused counts as accepted silently, a run that reaches
    the lab too, and a refusal claimed to be fine as a wrong outcome: the table cannot be
    green by construction."""
    fine = {"s.yaml": inputs.scenario()}
    validate = ["scenarios", "validate", "s.yaml"]
    silent = forked.run(inputs.Case("fine, said bad", validate, fine), tmp_path / "a")
    assert silent.outcome_class == inputs.SILENT, silent.output[-2000:]
    lab = forked.run(inputs.Case("runs", ["run", "--scenario", "refund"]), tmp_path / "b")
    assert lab.outcome_class == inputs.SILENT, lab.output[-2000:]
    assert lab.exit_code == inputs.LAB_EXIT
    bad = {"s.yaml": "[1]\n"}
    wrong = forked.run(
        inputs.Case("bad, said fine", validate, bad, expect=inputs.OK), tmp_path / "c"
    )
    assert wrong.outcome_class == inputs.WRONG
    unsaid = inputs.Case("refused for another reason", validate, bad, says="nothing like this")
    assert forked.run(unsaid, tmp_path / "d").outcome_class == inputs.WRONG
