"""What a certification had to strike, and what struck (harness/checkers/levels.py).

From each baseline, the trials a level asks for: every fault class of levels.REQUIRED_CLASSES
at every point of that baseline where levels.required_at says it applies, planned by the
same functions the matrix plans with (so a required trial carries the label its trial
would). A required trial is covered when a trial of that mode, scenario and label ran and
every planned fault struck. A black box reports no boundaries: there it is asked for the
classes that strike at world points or at the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from harness.checkers import levels
from harness.planning import plan
from harness.record import history

# A black box is faulted at world points, at seeded times and at the run: no pause, no
# lost COMMIT, no link cut (those need the engine's boundaries to aim at).
BLACKBOX_CLASSES: tuple[str, ...] = (levels.KILL, levels.LOST_RESPONSE, levels.RESUBMIT)


@dataclasses.dataclass(frozen=True)
class Required:
    mode: str
    scenario: str
    fault: str
    label: str

    def json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def classes_for(mode: str) -> tuple[str, ...]:
    return levels.REQUIRED_CLASSES if mode == "boundary" else BLACKBOX_CLASSES


def required_plans(
    mode: str, baseline: history.TrialHistory, faults: Iterable[str] | None = None
) -> list[tuple[str, list[Any]]]:
    """(class, plan) of every trial a level asks for after this baseline, of `faults` (all
    the mode's classes when None)."""
    trace = plan.baseline_trace(baseline)
    world = plan.world_trace(baseline)
    wanted = classes_for(mode) if faults is None else tuple(faults)
    found = []
    for fault in (f for f in classes_for(mode) if f in wanted):
        for steps in plan.fault_plans(trace, [fault], world=world):
            if levels.required_at(fault, steps[0].point):
                found.append((fault, steps))
    return found


def required_of(mode: str, baseline: history.TrialHistory) -> list[Required]:
    name = baseline.scenario.name
    return [
        Required(mode, name, fault, plan.plan_label(steps))
        for fault, steps in required_plans(mode, baseline)
    ]


def read(records: Sequence[dict[str, Any]]) -> list[Required]:
    return [
        Required(**{k: str(r[k]) for k in ("mode", "scenario", "fault", "label")}) for r in records
    ]


def struck_keys(trials: Iterable[Any]) -> set[tuple[str, str, str]]:
    """(mode, scenario, label) of every trial whose planned faults all struck."""
    return {(t.mode, t.scenario, t.label) for t in trials if t.struck}


def tally(
    required: Iterable[Required], struck: set[tuple[str, str, str]]
) -> dict[str, levels.Coverage]:
    """Per fault class: required trials that struck / required trials."""
    counts: dict[str, list[int]] = {}
    for item in required:
        count = counts.setdefault(item.fault, [0, 0])
        count[1] += 1
        count[0] += (item.mode, item.scenario, item.label) in struck
    return {
        fault: levels.Coverage(*counts[fault])
        for fault in levels.REQUIRED_CLASSES
        if fault in counts
    }


def complete_classes(required: list[Required]) -> dict[str, levels.Coverage]:
    """Classes no baseline offers a point for (no tool call: no tool_cut) are required
    nowhere: 0/0, complete. Every class a mode asks for is named, so none reads as absent."""
    modes = {item.mode for item in required}
    return {fault: levels.Coverage(0, 0) for mode in modes for fault in classes_for(mode)}


def by_class(required: list[Required], trials: Iterable[Any]) -> dict[str, levels.Coverage]:
    """The certification's coverage: per class, over every mode and scenario."""
    found = complete_classes(required)
    found.update(tally(required, struck_keys(trials)))
    return found


def by_scenario(
    required: list[Required], trials: Iterable[Any]
) -> dict[str, dict[str, levels.Coverage]]:
    """'mode:scenario' -> per class coverage, in the order the scenarios were certified."""
    struck = struck_keys(trials)
    groups: dict[str, list[Required]] = {}
    for item in required:
        groups.setdefault(f"{item.mode}:{item.scenario}", []).append(item)
    return {name: tally(items, struck) for name, items in groups.items()}


def line(coverage: dict[str, levels.Coverage]) -> str:
    """'32/96: kill 29/29, pause 0/27, ...' (struck / required, over the classes named)."""
    struck = sum(c.struck for c in coverage.values())
    required = sum(c.required for c in coverage.values())
    parts = ", ".join(f"{fault} {c.text()}" for fault, c in coverage.items() if c.required)
    return f"{struck}/{required}" + (f": {parts}" if parts else "")
