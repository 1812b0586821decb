"""Tool invariants read off the world's tool ledger: `tool.at_most_once`, `tool.same_key`.

A logical call is one scripted tool call. The world sees its tool, canonical arguments and
idempotency key, never its id, so requests are grouped by (tool, arguments) and the
script says how many logical calls share them (`facts.scripted_count`: the same reminder
posted twice is two). Within a group the key tells calls apart: one key names one call.
"""

from __future__ import annotations

import collections

from harness.checkers import facts, reach, verdict
from harness.record import history as history_module
from harness.world import ledger

AT_MOST_ONCE = "tool.at_most_once"
SAME_KEY = "tool.same_key"


def _allowed(count: int, what: str) -> str:
    return f"at most {count}" + (f", one per scripted {what}" if count > 1 else "")


def paired(entries: list[ledger.ToolRequest] | list[ledger.ToolEffect]) -> str:
    """`seq 3 key 'k1', seq 7 key 'k2'`: each ledger entry with its own key, in ledger
    order, so a reader never has to match a sorted key list against a seq list."""
    return ", ".join(
        f"seq {entry.seq} " + (f"key {entry.key!r}" if entry.key else "no key") for entry in entries
    )


def check_at_most_once(history: history_module.TrialHistory) -> verdict.CheckResult:
    effects: dict[facts.LogicalCall, list[ledger.ToolEffect]] = collections.defaultdict(list)
    for effect in facts.tool_effects(history):
        if facts.is_non_replayable(history, effect.tool):
            effects[facts.logical_call(effect.tool, effect.arguments)].append(effect)
    failures: list[str] = []
    notes: list[str] = facts.foreign_notes(history, "tools", "tools-mcp")
    held: list[str] = []  # the fact per logical call a PASS rests on
    counts = facts.scripted_counts(history)
    for call, applied in effects.items():
        allowed = facts.allowed_calls(counts, call)
        plural = "s" if len(applied) > 1 else ""
        held.append(
            f"{call}: {len(applied)} effect{plural} of at most {allowed} ({paired(applied)})"
        )
        line = (
            f"{call}: {len(applied)} effects in the world (expected {_allowed(allowed, 'call')}"
            f"), effects: {paired(applied)}"
        )
        if len(applied) > allowed:
            failures.append(line)
            continue
        notes.append(line)
        # Within the scripted count, a key applied twice is still one call applied twice.
        by_key = collections.Counter(effect.key for effect in applied if effect.key)
        for key, count in by_key.items():
            if count > 1:
                twice = ", ".join(str(effect.seq) for effect in applied if effect.key == key)
                failures.append(
                    f"{call}: key {key!r} applied {count} times (effect seq {twice}): one "
                    "logical call, expected at most one effect"
                )
    if not effects:
        nothing = "no effect of a non-replayable tool reached the world"
        notes.append(nothing)
        scripted = facts.scripted_calls(history).values()
        if any(facts.is_non_replayable(history, known.call.tool) for known in scripted):
            if unproven := reach.nothing_to_judge(AT_MOST_ONCE, nothing, history, notes):
                return unproven
            held.append(f"{nothing}; the run ended {facts.final_status(history)} as expected")
        else:
            held.append(f"{nothing}: the script makes no non-replayable call")
    return verdict.decide(AT_MOST_ONCE, failures=failures, notes=notes, passed="; ".join(held))


def check_same_key(history: history_module.TrialHistory) -> verdict.CheckResult:
    attempts: dict[facts.LogicalCall, list[ledger.ToolRequest]] = collections.defaultdict(list)
    for request in facts.tool_requests(history):
        attempts[facts.logical_call(request.tool, request.arguments)].append(request)
    scripted = facts.scripted_calls(history)
    answered = facts.answered_ok(history)
    failures: list[str] = []
    notes: list[str] = []
    held: list[str] = []  # the fact per logical call a PASS rests on
    owners: dict[str, list[facts.LogicalCall]] = collections.defaultdict(list)
    keyless: list[int] = []  # requests of calls that never carried a key
    counts = facts.scripted_counts(history)
    for call, requests in attempts.items():
        allowed = facts.allowed_calls(counts, call)
        missing = [request.seq for request in requests if not request.key]
        keys = sorted({request.key for request in requests if request.key})
        if missing and not keys:
            keyless += missing
        elif missing:  # a key on some attempts, none on others: dropped, not changed
            failures.append(
                f"{call}: request seq {missing} carried no idempotency key, where its other "
                f"attempts carried {keys}"
            )
        if len(keys) > allowed:
            failures.append(
                f"{call}: {len(requests)} attempts carried {len(keys)} different keys "
                f"(expected {_allowed(allowed, 'call')}): requests: {paired(requests)}"
            )
        elif keys:
            notes.append(f"{call}: {len(requests)} attempt(s), requests: {paired(requests)}")
            plural = "s" if len(requests) > 1 else ""
            held.append(
                f"{call}: key {keys[0]!r} on {len(requests)} request{plural}"
                if len(keys) == 1
                else f"{call}: {len(keys)} keys for {allowed} scripted calls ({paired(requests)})"
            )
        # Every call answered ok reached the world under its own key: fewer keys than
        # such calls means one key served two calls with equal arguments.
        served = sorted(cid for cid in answered if cid in scripted and scripted[cid].call == call)
        if keys and len(served) > len(keys):
            failures.append(
                f"{call}: calls {served} were answered ok to the model, but the world saw "
                f"only {len(keys)} key(s) {keys}: one key was shared by two logical calls"
            )
        for key in keys:
            owners[key].append(call)
    for key, calls in owners.items():
        if len(calls) > 1:
            failures.append(
                f"key {key!r} shared by {len(calls)} distinct calls: "
                + "; ".join(str(call) for call in calls)
            )
    if keyless:  # one line for the engine's habit, not one per call
        failures.insert(
            0,
            f"no idempotency key sent: {len(keyless)} tool request(s) carried none "
            f"(seq {sorted(keyless)})",
        )
    ids_by_key: dict[str, list[str]] = collections.defaultdict(list)
    for call_id, key in facts.named_keys(history).items():
        ids_by_key[key].append(call_id)
    for key, ids in ids_by_key.items():
        if len(ids) > 1:
            failures.append(
                f"key {key!r} named by the engine for {len(ids)} calls {sorted(ids)} "
                "(report tool_calls, boundary details)"
            )
    if not attempts:
        notes.append("no tool request reached the world")
        if scripted and not failures:
            nothing = "no tool request reached the world"
            if unproven := reach.nothing_to_judge(SAME_KEY, nothing, history, notes):
                return unproven
    passed = "one key per logical call, none shared: " + "; ".join(held)
    if not attempts:
        passed = "no tool request reached the world" + (
            "; the run ended as expected" if scripted else ": the script makes no tool call"
        )
    return verdict.decide(SAME_KEY, failures=failures, notes=notes, passed=passed)
