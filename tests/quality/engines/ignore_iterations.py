"""Broken variant of the reference engine: it never checks the iterations budget (model
calls) before an inference; tokens are still enforced.

    python tests/quality/engines/ignore_iterations.py worker   (see ignore_iterations.yaml)
"""

from __future__ import annotations

import dataclasses
import sys

from reference_engine import cli, decide
from reference_engine import state as state_module

_refusal = decide._budget_refusal


def budget_refusal(budget: state_module.Budget) -> decide.Finish | None:
    # BROKEN: the iterations limit is never reached
    return _refusal(dataclasses.replace(budget, iterations=budget.iterations_used + 1))


def install() -> None:
    decide._budget_refusal = budget_refusal


if __name__ == "__main__":
    install()
    sys.exit(cli.main())
