"""Every hostile case, from the modules that write them (one concern each)."""

from __future__ import annotations

from tests.hostile import cases_faults, cases_files, cases_options, inputs

CASES: list[inputs.Case] = [
    *inputs.CASES,
    *cases_faults.CASES,
    *cases_options.CASES,
    *cases_files.CASES,
]
