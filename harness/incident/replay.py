"""An incident scenario replayed: its faults, then each variant, each as the one trial
`crashcert run --scenario FILE --fault ...` runs (harness/incident/variants.py concludes)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Sequence

from harness.incident import variants
from harness.lab import shared
from harness.scenario import schema
from harness.trial import runner

# Told each plan before it runs ("faults", "variant 1/2") and each outcome after.
Show = Callable[[str, runner.TrialSpec, runner.TrialOutcome | None], None]


def plans_of(scenario: schema.Scenario, *, with_variants: bool) -> list[list[str]]:
    """The scenario's faults, then (unless told not to) each of its variants: fault texts."""
    return [list(scenario.faults), *([list(v) for v in scenario.variants] if with_variants else [])]


def replay(
    lab: shared.Lab,
    scenario: schema.Scenario,
    plans: Sequence[Sequence[str]],
    *,
    scenario_ref: str,
    engine_ref: str,
    seed: int,
    out_dir: pathlib.Path,
    show: Show,
) -> list[variants.Replayed]:
    replays: list[variants.Replayed] = []
    for number, faults in enumerate(plans):
        spec = runner.TrialSpec.under(
            scenario, faults, scenario_ref=scenario_ref, engine_ref=engine_ref, seed=seed
        )
        what = "faults" if number == 0 else f"variant {number}/{len(plans) - 1}"
        show(what, spec, None)
        outcome = runner.run_trial(lab, spec, out_dir=out_dir)
        show(what, spec, outcome)
        failed = [r.invariant for r in outcome.results if r.verdict.value == "FAIL"]
        replays.append(variants.Replayed(spec.label, outcome.verdict, failed))
    return replays
