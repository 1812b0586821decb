"""Conformance levels: what a certification lets a buyer rely on (harness/CONTRACT.md s. 7).

A level is granted when every invariant it lists PASSed in every trial of the
certification (baselines and every fault class run). A FAIL or ERROR anywhere loses it; so
does an INCONCLUSIVE: a guarantee that was not demonstrated is not granted. Levels nest:
each one lists the invariants of the one below it.
"""

from __future__ import annotations

import dataclasses
import enum

from harness import checkers


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


AT_LEAST_ONCE_REQUIRES: tuple[str, ...] = ("run.liveness",)
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
        "every invariant held under every fault class run: no repeated model call after a "
        "committed decision, one key per call, unknown outcomes surfaced, leases fenced, "
        "frontier monotonic, transcripts intact",
        "brightgreen",
    ),
    LevelSpec(
        Level.CRASH_SAFE,
        CRASH_SAFE_REQUIRES,
        "runs finish after crashes; no non-replayable effect twice, no reply twice, no "
        "budget given back; the engine may still repeat model calls or lose detail",
        "yellow",
    ),
    LevelSpec(
        Level.AT_LEAST_ONCE,
        AT_LEAST_ONCE_REQUIRES,
        "runs finish after crashes, but side effects, replies or model calls may repeat",
        "orange",
    ),
    LevelSpec(Level.NONE, (), "runs can be lost, hang or end in the wrong status", "red"),
)


def spec(level: Level) -> LevelSpec:
    return next(item for item in LEVELS if item.level is level)


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
    """The highest level whose invariants all held."""
    for item in LEVELS:
        if set(item.requires) <= held:
            return item.level
    return Level.NONE


def badge(level: Level) -> str:
    label = level.value.replace("-", "--")
    return f"![crashcert](https://img.shields.io/badge/crashcert-{label}-{spec(level).colour})"
