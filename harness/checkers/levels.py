"""Conformance levels: what a certification lets a buyer rely on (harness/CONTRACT.md s. 8).

A level is earned twice over. Evidence: every invariant it lists PASSed in every trial of
the certification (baselines and every fault class run); a FAIL, ERROR or INCONCLUSIVE
anywhere loses it. Coverage: every fault class that can break one of its invariants, within
the level's fault model, was run at every point where it applies, and struck. A level whose
evidence holds but whose coverage does not is capped, and the certificate says which
classes were missing. Levels nest: each lists the invariants and fault classes of the one
below it.
"""

from __future__ import annotations

import dataclasses
import enum
import urllib.parse
from collections.abc import Iterable, Mapping

from harness import checkers
from harness.contract import boundaries
from harness.faults import spec as fault_spec


class Level(enum.StrEnum):
    FULL = "FULL"
    CRASH_SAFE = "CRASH-SAFE"
    AT_LEAST_ONCE = "AT-LEAST-ONCE"
    NONE = "NONE"


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    level: Level
    requires: tuple[str, ...]
    meaning: str
    colour: str  # shields.io badge colour
    # The fault classes the level promises to survive: of the classes that can break one
    # of its invariants (BREAKS), these must have been run at every applicable point.
    fault_model: tuple[str, ...] = ()


# --- which faults can break which invariant (CONTRACT.md s. 8, "What a level rests on") -----

KILL = "kill"
# A worker that wakes after its lease (pause) is what breaks fencing, and everything a late
# worker can repeat: a decided turn asked again, an effect called twice, a stale commit.
LATE = "pause"
# A COMMIT whose acknowledgement never comes: the engine cannot tell what is durable.
ACK = ("commit_lost", "commit_dropped")
# The world did the work and its answer was lost: only a key can tell the retry apart.
LOST_RESPONSE = "response_lost"
RESUBMIT = "submit_twice"
# Link classes strike where the engine talks to that service: right before it calls it.
LINK_POINTS: dict[str, tuple[str, ...]] = {
    "tools": ("tool.started",),
    "model": ("model.pending",),
    "sink": ("reply.sending",),
}
TOOL_CUT, MODEL_CUT, SINK_CUT = "tool_cut", "model_cut", "sink_cut"
_COMMITS = (KILL, LATE, *ACK)

BREAKS: dict[str, tuple[str, ...]] = {
    "model.once_after_decision": (*_COMMITS, MODEL_CUT),
    "model.count": (*_COMMITS, LOST_RESPONSE, MODEL_CUT),
    "tool.at_most_once": (*_COMMITS, LOST_RESPONSE, TOOL_CUT),
    # Work claimed done that never happened: a call given up on a cut link or a lost
    # answer, or skipped when a resumed run misreads where it stopped.
    "tool.at_least_once": (*_COMMITS, LOST_RESPONSE, TOOL_CUT),
    "tool.same_key": (*_COMMITS, LOST_RESPONSE, TOOL_CUT),
    "tool.approval": _COMMITS,
    "tool.unknown_outcome": (KILL, LATE, LOST_RESPONSE, TOOL_CUT),
    "budget.not_restored": (*_COMMITS, LOST_RESPONSE, MODEL_CUT),
    "reply.single_delivery": (*_COMMITS, LOST_RESPONSE, SINK_CUT),
    "run.single_submit": (KILL, RESUBMIT),
    "run.liveness": (*_COMMITS, LOST_RESPONSE, RESUBMIT, TOOL_CUT, MODEL_CUT, SINK_CUT),
    "lease.fencing": _COMMITS,
    "transcript.intact": (KILL, LATE, LOST_RESPONSE, TOOL_CUT, MODEL_CUT),
    "frontier.monotonic": _COMMITS,
}
# Every class a level can ask for, in the order certificates name them.
REQUIRED_CLASSES: tuple[str, ...] = (
    *_COMMITS,
    LOST_RESPONSE,
    RESUBMIT,
    TOOL_CUT,
    MODEL_CUT,
    SINK_CUT,
)


def breaks(invariant: str) -> tuple[str, ...]:
    """The classes that can break `invariant`; an invariant registered since this table was
    written is asked for every class, never for none."""
    return BREAKS.get(invariant, REQUIRED_CLASSES)


def required_at(fault: str, point: str) -> bool:
    """Whether a level asks for `fault` at `point`: wherever it applies (spec.applies_at), a
    link class only where the engine is about to call that service."""
    if not fault_spec.applies_at(fault, point):
        return False
    service = fault_spec.LINKS.get(fault)
    return service is None or boundaries.base_name(point) in LINK_POINTS[service]


# A run that finishes claiming work it never did is not at-least-once: the customer is told
# "refunded" and no refund happened. tool.at_least_once is the floor's other half.
AT_LEAST_ONCE_REQUIRES: tuple[str, ...] = ("run.liveness", "tool.at_least_once")
CRASH_SAFE_REQUIRES: tuple[str, ...] = (
    *AT_LEAST_ONCE_REQUIRES,
    "tool.at_most_once",
    "reply.single_delivery",
    # A client's retried submit that starts a second run repeats the whole run: its model
    # calls, its effects (under new idempotency keys, so no tool dedupes them) and its
    # reply. That is reply.single_delivery's harm seen from the client, so it sits here.
    "run.single_submit",
    "budget.not_restored",
)

# Highest first.
LEVELS: tuple[LevelSpec, ...] = (
    LevelSpec(
        Level.FULL,
        checkers.INVARIANTS,
        "every invariant held under every fault class the contract names: no repeated model "
        "call after a committed decision, one key per call, unknown outcomes surfaced, leases "
        "fenced, frontier monotonic, transcripts intact",
        "brightgreen",
        REQUIRED_CLASSES,
    ),
    LevelSpec(
        Level.CRASH_SAFE,
        CRASH_SAFE_REQUIRES,
        "runs finish after crashes and client retries; no non-replayable effect twice, no "
        "reply twice, no budget given back; the engine may still repeat model calls or lose "
        "detail",
        "yellow",
        (KILL, RESUBMIT),
    ),
    LevelSpec(
        Level.AT_LEAST_ONCE,
        AT_LEAST_ONCE_REQUIRES,
        "runs finish after crashes, but side effects, replies or model calls may repeat",
        "orange",
        (KILL,),
    ),
    LevelSpec(Level.NONE, (), "runs can be lost, hang or end in the wrong status", "red"),
)


def spec(level: Level) -> LevelSpec:
    return next(item for item in LEVELS if item.level is level)


def required_classes(level: Level) -> tuple[str, ...]:
    """The classes `level` must have run: those that can break one of its invariants,
    within its fault model, in REQUIRED_CLASSES' order."""
    item = spec(level)
    wanted = {fault for invariant in item.requires for fault in breaks(invariant)}
    return tuple(f for f in REQUIRED_CLASSES if f in wanted and f in item.fault_model)


def rank(level: Level) -> int:
    """FULL 3 ... NONE 0."""
    return len(LEVELS) - 1 - [item.level for item in LEVELS].index(level)


def parse(text: str) -> Level:
    wanted = text.strip().upper().replace("_", "-")
    for level in Level:
        if level.value == wanted:
            return level
    raise ValueError(f"unknown level {text!r}; known: {', '.join(level.value for level in Level)}")


def grant(held: set[str]) -> Level:
    """The highest level whose invariants all held (the evidence alone)."""
    for item in LEVELS:
        if set(item.requires) <= held:
            return item.level
    return Level.NONE


# --- coverage -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Coverage:
    """Of one fault class: the (scenario, point, occurrence) trials a level asks for, and
    how many of them ran and struck."""

    struck: int
    required: int

    @property
    def complete(self) -> bool:
        return self.struck >= self.required

    def text(self) -> str:
        return f"{self.struck}/{self.required}"


def short_of(level: Level, coverage: Mapping[str, Coverage]) -> list[str]:
    """What keeps `level`'s coverage from holding: 'pause not run', 'kill struck 20/29'. A
    class absent from `coverage` was not planned at all: not run."""
    missing = []
    for fault in required_classes(level):
        found = coverage.get(fault)
        if found is None or (found.struck == 0 and found.required > 0):
            missing.append(f"{fault} not run")
        elif not found.complete:
            missing.append(f"{fault} struck {found.text()}")
    return missing


def earned(held: set[str], coverage: Mapping[str, Coverage]) -> Level:
    """The highest level whose invariants all held and whose fault classes were all run
    at every applicable point."""
    for item in LEVELS:
        if set(item.requires) <= held and not short_of(item.level, coverage):
            return item.level
    return Level.NONE


def capped_note(held: set[str], coverage: Mapping[str, Coverage]) -> str:
    """'' when the evidence grants no more than was covered; else what the level the
    evidence would grant still needs: 'FULL needs pause, commit_lost not run'."""
    shown = grant(held)
    if rank(earned(held, coverage)) >= rank(shown):
        return ""
    return f"{shown.value} needs {joined(short_of(shown, coverage))}"


def joined(parts: list[str]) -> str:
    """'pause not run', 'commit_lost not run' -> 'pause, commit_lost not run'."""
    not_run = [part.removesuffix(" not run") for part in parts if part.endswith(" not run")]
    rest = [part for part in parts if not part.endswith(" not run")]
    return "; ".join([*([f"{', '.join(not_run)} not run"] if not_run else []), *rest])


def title(held: set[str], coverage: Mapping[str, Coverage]) -> str:
    """'CRASH-SAFE (FULL needs pause, commit_lost not run)', or the level alone."""
    note = capped_note(held, coverage)
    level = earned(held, coverage).value
    return f"{level} ({note})" if note else level


def badge(level: Level, fault_classes: Iterable[str] = ()) -> str:
    """A shields.io badge; with `fault_classes`, the message names the classes it rests on."""
    classes = list(fault_classes)
    message = level.value + (f" ({', '.join(classes)})" if classes else "")
    escaped = urllib.parse.quote(message.replace("-", "--").replace("_", "__"), safe="")
    return f"![crashcert](https://img.shields.io/badge/crashcert-{escaped}-{spec(level).colour})"


# `crashcert certify --quick`: crashes and client retries only. It cannot earn FULL, whose
# fault model asks for more (a test pins that), so a quick certificate never prints it.
QUICK_CLASSES: tuple[str, ...] = (KILL, RESUBMIT)
