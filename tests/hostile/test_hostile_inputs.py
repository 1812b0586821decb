"""Every hostile input of tests/hostile/inputs.py is refused clearly and in bounded time."""

from __future__ import annotations

import pathlib

import pytest

from tests.hostile import inputs


@pytest.mark.parametrize("case", inputs.CASES, ids=[case.name for case in inputs.CASES])
def test_refused_clearly(case: inputs.Case, tmp_path: pathlib.Path) -> None:
    outcome = inputs.run(case, tmp_path)
    assert outcome.exit_code is not None, f"hung past {case.limit_s} s: {outcome.output[-2000:]}"
    assert not outcome.traceback, outcome.output[-3000:]
    assert not outcome.leaked, outcome.output[-3000:]
    assert not outcome.internal, outcome.output[-3000:]
    assert outcome.exit_code in inputs.ACCEPTED_EXIT, (outcome.exit_code, outcome.output[-3000:])
    assert outcome.output.strip()
