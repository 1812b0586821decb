"""Judging an engine on what it could know after an asynchronous failover lost commits.

`pg_failover?sync=0` promotes a standby that never received the last commits the primary
acknowledged; the trial's `pg_failover` record names them (`observed.lost`: the commit
points the engine reported after WAL shipping paused, when the standby was behind). The
engine's durable state rolled back under it: a decision it was told was committed is gone,
and redoing it is the right recovery, not a repeat. So (harness/CONTRACT.md section 7,
"Lost acknowledged commits"):

- the invariants of the work itself stay strict: the run still ends in time, does the
  work it claims, starts no second run and runs nothing unapproved (STRICT);
- `tool.at_most_once` stays strict for a tool that honours idempotency keys, unless a
  decision (`tools.pending`, `reply.ready`) was lost: the key lives in the decision,
  which outlives the failover, so a second effect means a second key the engine minted;
- `run.single_submit` stays strict, except where the purge of the key's run was lost and
  no client resubmitted: the run the engine still has is the one a request reusing the
  key is answered with (the purged run came back with the promoted standby);
- any other FAIL becomes INCONCLUSIVE, naming the lost transitions: it may rest on them.

A PASS stays a PASS; a trial that lost nothing is judged as any other.
"""

from __future__ import annotations

import collections

from harness.checkers import approval, effects, facts, liveness, submit, tools, verdict
from harness.contract import boundaries
from harness.record import history as history_module
from harness.record import resubmit

ACTION = "pg_failover"
STRICT = frozenset({liveness.INVARIANT, effects.INVARIANT, submit.INVARIANT, approval.INVARIANT})
PURGED = boundaries.RETENTION[0]  # run.purged: the purge committed


def lost(history: history_module.TrialHistory) -> list[str]:
    """The acknowledged transitions the failover lost, as `point#occurrence`."""
    return [
        str(label)
        for fault in history.faults()
        if fault.action == ACTION and fault.ok
        for label in fault.observed.get("lost") or []
    ]


def excuse(
    history: history_module.TrialHistory, results: list[verdict.CheckResult]
) -> list[verdict.CheckResult]:
    """`results` with every FAIL the lost commits may explain turned INCONCLUSIVE."""
    gone = lost(history)
    if not gone:
        return results
    return [_judged(history, result, gone) for result in results]


def _judged(
    history: history_module.TrialHistory, result: verdict.CheckResult, gone: list[str]
) -> verdict.CheckResult:
    if result.verdict is not verdict.Verdict.FAIL:
        return result
    if result.invariant in STRICT and not _purge_forgotten(history, result, gone):
        return result
    if result.invariant == tools.AT_MOST_ONCE:
        if (repeated := keyed_repeats(history)) and not _decision_lost(gone):
            return result.model_copy(
                update={
                    "evidence": [
                        *result.evidence,
                        f"not excused by the failover's lost commits ({', '.join(gone)}): "
                        f"{', '.join(repeated)} honour(s) idempotency keys and no decision "
                        "was lost, so the key was still known",
                    ]
                }
            )
    what = ", ".join(gone)
    return verdict.CheckResult(
        invariant=result.invariant,
        verdict=verdict.Verdict.INCONCLUSIVE,
        summary=f"the failover lost acknowledged commits ({what}); this FAIL may rest on "
        f"them: {result.summary}",
        evidence=[
            f"asynchronous failover: the engine was told {what} committed, and the promoted "
            "standby never had them; judged on what the engine could know",
            *result.evidence,
        ],
        durable=result.durable,
    )


def keyed_repeats(history: history_module.TrialHistory) -> list[str]:
    """Logical calls of non-replayable tools that honour idempotency keys, with more
    effects in the world than the script makes."""
    applied: collections.Counter[facts.LogicalCall] = collections.Counter()
    for effect in facts.tool_effects(history):
        tool = facts.tool_spec(history, effect.tool)
        if tool is not None and tool.replay == "non_replayable" and tool.honours_idempotency_key:
            applied[facts.logical_call(effect.tool, effect.arguments)] += 1
    counts = facts.scripted_counts(history)
    return [
        str(call) for call, count in applied.items() if count > facts.allowed_calls(counts, call)
    ]


def _purge_forgotten(
    history: history_module.TrialHistory, result: verdict.CheckResult, gone: list[str]
) -> bool:
    """A run.single_submit FAIL whose only ground is a purge the failover lost: no client
    resubmitted, so every failure is about the request that reused the purged key."""
    return (
        result.invariant == submit.INVARIANT
        and any(label.partition("#")[0] == PURGED for label in gone)
        and not [fault for fault in history.faults() if fault.action == resubmit.ACTION]
    )


def _decision_lost(gone: list[str]) -> bool:
    return any(
        boundaries.base_name(label.partition("#")[0]) in facts.DECISION_POINTS for label in gone
    )
