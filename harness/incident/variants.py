"""The fault plans an incident's record cannot tell apart.

An engine's record shows where a worker stopped, not always what it had done: a tool call
marked started may have reached the service (`tool.started` vs `tool.returned`), a reply
marked sending may have reached the sink (`reply.sending` vs `reply.sent`), an opened model
call may have been answered (`model.pending` vs `model.returned`), and a commit seen
durable may have landed without its acknowledgement reaching the worker (`kill@P` vs
`commit_lost@P:before_commit`). Each inferred fault has such alternatives; a replay runs the
plan and every combination of them (`crashcert replay`), and the incident reproduces if any
does. Pure: labels in, labels out.
"""

from __future__ import annotations

import dataclasses
import itertools

from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import spec

# A replay runs one trial per plan: beyond this many the rest are named in the note only.
MAX_VARIANTS = 8
# The external call that may have happened after a durable point.
AFTER = {
    "tool.started": "tool.returned",
    "reply.sending": "reply.sent",
    "model.pending": "model.returned",
}
WHY = {
    "tool.returned": "the tool may have answered (its effect happened) before the crash",
    "reply.sent": "the sink may have taken the reply before the crash",
    "model.returned": "the model may have answered before the crash",
    "commit_lost": "the commit landed but its acknowledgement may never have reached the worker",
}


@dataclasses.dataclass(frozen=True)
class Alternative:
    fault: str
    why: str


@dataclasses.dataclass(frozen=True)
class Variants:
    plans: list[list[str]]  # alternative fault plans, the original plan not among them
    notes: list[str]


def alternatives(fault: str, *, after_occurrence: int | None = None) -> list[Alternative]:
    """What else a kill the record shows at `fault` may have been. `after_occurrence`
    numbers the external call's own point (`tool.returned#N` counts returns, not starts);
    without it the durable point's occurrence is used."""
    step = spec.read_label(fault)
    if step is None or step.action != "kill" or step.params:
        return []
    found: list[Alternative] = []
    after = AFTER.get(step.point)
    if after is not None:
        occurrence = after_occurrence or step.occurrence
        found.append(Alternative(f"kill@{after}#{occurrence}", WHY[after]))
    if step.point in boundaries.BEFORE_COMMIT:
        twin = f"{step.point}{boundaries.BEFORE_COMMIT_SUFFIX}"
        found.append(Alternative(f"commit_lost@{twin}#{step.occurrence}", WHY["commit_lost"]))
    return found


def combine(faults: list[str], options: list[list[Alternative]]) -> Variants:
    """Every plan with each fault replaced by itself or one of its alternatives, the
    original plan left out; at most MAX_VARIANTS, the rest named in a note."""
    pairs = list(zip(faults, options, strict=True))
    choices = [[fault, *(alt.fault for alt in alts)] for fault, alts in pairs]
    notes = [f"{alt.fault} instead of {fault}: {alt.why}" for fault, alts in pairs for alt in alts]
    plans = [list(plan) for plan in itertools.product(*choices) if list(plan) != faults]
    if len(plans) > MAX_VARIANTS:
        left = ["+".join(plan) for plan in plans[MAX_VARIANTS:]]
        notes.append(f"{len(left)} more variant(s) not replayed: {', '.join(left)}")
        plans = plans[:MAX_VARIANTS]
    return Variants(plans=plans, notes=notes)


# -- the replay of every plan -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Replayed:
    """One plan's trial: its label, its verdict and the invariants that FAILed."""

    label: str
    verdict: verdict_module.Verdict
    failed: list[str]


def conclude(replays: list[Replayed]) -> tuple[verdict_module.Verdict, str]:
    """The verdict of the whole replay and its sentence: the incident reproduces if any plan
    FAILs (the sentence names each that did); it no longer reproduces when every plan
    PASSes; otherwise the replay is inconclusive, naming the plans that proved nothing."""
    verdict = verdict_module.worst(r.verdict for r in replays)
    if verdict is verdict_module.Verdict.FAIL:
        failing = [r for r in replays if r.verdict is verdict]
        named = "; ".join(f"{r.label} ({', '.join(r.failed) or 'FAIL'})" for r in failing)
        others = [f"{r.label} {r.verdict.value}" for r in replays if r not in failing]
        rest = f"; not by {', '.join(others)}" if others else ""
        return verdict, f"incident reproduced by {named}{rest}"
    if verdict is verdict_module.Verdict.PASS:
        labels = ", ".join(r.label for r in replays)
        return verdict, f"incident no longer reproduces ({len(replays)} plan(s) PASS: {labels})"
    unproven = [
        f"{r.label} {r.verdict.value}"
        for r in replays
        if r.verdict is not verdict_module.Verdict.PASS
    ]
    return verdict, f"incident replay inconclusive ({', '.join(unproven) or 'nothing replayed'})"
