"""Tool invariants read off the world's tool ledger: `tool.at_most_once`, `tool.same_key`.

A logical call is (tool, canonical JSON of its arguments): attempts of one call are the
requests the world saw with equal tool and arguments, whatever the engine called them.
"""

from __future__ import annotations

import collections

from harness import history as history_module
from harness.checkers import facts, verdict
from harness.world import ledger

AT_MOST_ONCE = "tool.at_most_once"
SAME_KEY = "tool.same_key"


def check_at_most_once(history: history_module.TrialHistory) -> verdict.CheckResult:
    effects: dict[facts.LogicalCall, list[ledger.ToolEffect]] = collections.defaultdict(list)
    for effect in facts.tool_effects(history):
        if facts.is_non_replayable(history, effect.tool):
            effects[facts.logical_call(effect.tool, effect.arguments)].append(effect)
    failures: list[str] = []
    notes: list[str] = []
    for call, applied in effects.items():
        keys = sorted({str(effect.key) for effect in applied})
        seqs = ", ".join(str(effect.seq) for effect in applied)
        line = (
            f"{call}: {len(applied)} effects in the world (expected at most 1), "
            f"keys {keys}, effect seq {seqs}"
        )
        (failures if len(applied) > 1 else notes).append(line)
    if not effects:
        notes.append("no effect of a non-replayable tool reached the world")
    return verdict.decide(
        AT_MOST_ONCE,
        failures=failures,
        notes=notes,
        passed=f"each non-replayable effect at most once ({len(effects)} calls)",
    )


def check_same_key(history: history_module.TrialHistory) -> verdict.CheckResult:
    attempts: dict[facts.LogicalCall, list[ledger.ToolRequest]] = collections.defaultdict(list)
    for request in facts.tool_requests(history):
        attempts[facts.logical_call(request.tool, request.arguments)].append(request)
    failures: list[str] = []
    notes: list[str] = []
    owners: dict[str, list[facts.LogicalCall]] = collections.defaultdict(list)
    for call, requests in attempts.items():
        seqs = ", ".join(str(request.seq) for request in requests)
        missing = [request.seq for request in requests if not request.key]
        if missing:
            failures.append(f"{call}: request seq {missing} carried no idempotency key")
        keys = sorted({request.key for request in requests if request.key})
        if len(keys) > 1:
            failures.append(
                f"{call}: {len(requests)} attempts carried {len(keys)} different keys {keys} "
                f"(request seq {seqs})"
            )
        elif keys:
            notes.append(f"{call}: {len(requests)} attempt(s), key {keys[0]!r} (seq {seqs})")
        for key in keys:
            owners[key].append(call)
    for key, calls in owners.items():
        if len(calls) > 1:
            failures.append(
                f"key {key!r} shared by {len(calls)} distinct calls: "
                + "; ".join(str(call) for call in calls)
            )
    if not attempts:
        notes.append("no tool request reached the world")
    return verdict.decide(
        SAME_KEY,
        failures=failures,
        notes=notes,
        passed=f"one key per logical call, none shared ({len(attempts)} calls)",
    )
