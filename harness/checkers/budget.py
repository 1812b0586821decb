"""`budget.not_restored`: consumed budgets never go down and never exceed their limits.

Read over the report snapshots in time order, against what the world really served: every
inference answered 200 was reserved, every logical call that reached a tool was counted,
and billed tokens are the usage of recorded model results, each a real response, once.
An answer the engine went on to use (its tool calls reached the world, a later turn was
asked for, its reply was posted) was recorded, so its turn is billed; only answers lost
before they were recorded, and never used, may be missing.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses

from harness.checkers import facts, reach, verdict
from harness.contract import run_report
from harness.record import history as history_module
from harness.scenario import schema
from harness.world import ledger

INVARIANT = "budget.not_restored"
ITERATIONS, TOOL_CALLS, TOKENS = facts.ITERATIONS, facts.TOOL_CALLS, facts.TOKENS


def _total(usage: dict[str, int] | None) -> int | None:
    if not usage:
        return None
    if "total_tokens" in usage:
        return usage["total_tokens"]
    return usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)


def _monotonic(reports: list[run_report.RunReport], failures: list[str]) -> None:
    last: dict[str, tuple[int, int]] = {}  # budget -> (used, snapshot index)
    for index, report in enumerate(reports):
        for name, use in report.budget.items():
            if name in last and use.used < last[name][0]:
                failures.append(
                    f"{name} used went down from {last[name][0]} (snapshot {last[name][1]}) "
                    f"to {use.used} (snapshot {index})"
                )
            last[name] = (use.used, index)
            if name in (ITERATIONS, TOOL_CALLS) and use.used > use.limit:
                failures.append(
                    f"{name} used {use.used} exceeds its limit {use.limit} (snapshot {index})"
                )


def _tokens(
    history: history_module.TrialHistory,
    report: run_report.RunReport,
    failures: list[str],
    notes: list[str],
) -> None:
    tokens = report.budget[TOKENS]
    recorded = [call for call in report.model_calls if call.state == "recorded"]
    billed = sum(_total(call.usage) or 0 for call in recorded)
    if tokens.used != billed:
        failures.append(
            f"tokens used {tokens.used} != {billed}, the usage of the report's "
            f"{len(recorded)} recorded model calls"
        )
    served = collections.Counter(
        (request.turn, _total(request.usage))
        for request in facts.model_requests(history, answered_only=True)
    )
    for call in recorded:
        wanted = (call.turn, _total(call.usage))
        if served[wanted] > 0:
            served[wanted] -= 1
        else:
            failures.append(
                f"recorded model call of turn {call.turn} bills {wanted[1]} tokens, matching "
                "no unused 200 response of that turn in the model ledger"
            )
    if tokens.used <= tokens.limit:
        notes.append(f"tokens used {tokens.used} within the limit {tokens.limit}")
    else:
        last = (_total(recorded[-1].usage) or 0) if recorded else 0
        over = tokens.used - tokens.limit
        if report.status == "budget_exhausted" and over <= last:
            notes.append(
                f"tokens used {tokens.used} exceed the limit {tokens.limit} by {over}, within "
                f"the last recorded call ({last}): tokens are known only after a call and "
                "were really consumed"
            )
        else:
            failures.append(
                f"tokens used {tokens.used} exceed the limit {tokens.limit} by {over} "
                f"(status {report.status}, last recorded call {last})"
            )


@dataclasses.dataclass(frozen=True)
class _Use:
    seq: int
    what: str


@dataclasses.dataclass(frozen=True)
class _Seen:
    """The ledgers _uses reads, derived once for all the turns it is asked about (a long
    run has as many turns as requests: derived per turn, judging grew as their square)."""

    model: list[ledger.ModelRequest]
    tools: list[tuple[ledger.ToolRequest, facts.LogicalCall]]
    replies: list[ledger.ReplyRequest]
    scripted: list[facts.ScriptedCall]

    @classmethod
    def of(cls, history: history_module.TrialHistory) -> _Seen:
        return cls(
            model=facts.model_requests(history),
            tools=[
                (request, facts.logical_call(request.tool, request.arguments))
                for request in facts.tool_requests(history)
            ],
            replies=facts.reply_requests(history),
            scripted=list(facts.scripted_calls(history).values()),
        )


def _uses(history: history_module.TrialHistory, seen: _Seen, turn: int, after: int) -> list[_Use]:
    """What the world saw after ledger seq `after` that only an answer of `turn` explains."""
    scripted = history.scenario.turns[turn]
    uses = [
        _Use(request.seq, f"model request seq {request.seq} asks for turn {request.turn}")
        for request in seen.model
        if request.seq > after and request.turn > turn
    ]
    # A call with these arguments in another turn as well does not say which turn it is.
    mine = {call.call for call in seen.scripted if call.turn == turn}
    elsewhere = {call.call for call in seen.scripted if call.turn != turn}
    for request, call in seen.tools:
        if request.seq > after and call in mine - elsewhere:
            uses.append(_Use(request.seq, f"tool request seq {request.seq} {call}"))
    if scripted.content is not None:
        content = schema.substitute_run_key(scripted.content, history.run_key)
        uses.extend(
            _Use(request.seq, f"reply request seq {request.seq} posts its content")
            for request in seen.replies
            if request.seq > after and request.content == content
        )
    return sorted(uses, key=lambda use: use.seq)


def _describe_usage(answer: ledger.ModelRequest) -> str:
    usage = answer.usage or {}
    return (
        f"{_total(usage)} tokens: prompt {usage.get('prompt_tokens')}, "
        f"completion {usage.get('completion_tokens')}"
    )


def _unbilled(
    history: history_module.TrialHistory,
    report: run_report.RunReport,
    failures: list[str],
    notes: list[str],
) -> None:
    """Each turn whose answer the engine used has a recorded model call in the report."""
    billed = {call.turn for call in report.model_calls if call.state == "recorded"}
    by_turn: dict[int, list[ledger.ModelRequest]] = collections.defaultdict(list)
    for answer in facts.model_requests(history, answered_only=True):
        by_turn[answer.turn].append(answer)
    seen = _Seen.of(history)
    for turn, answers in sorted(by_turn.items()):
        if turn >= len(history.scenario.turns):
            continue
        uses = _uses(history, seen, turn, answers[0].seq)
        if not uses:
            notes.append(f"turn {turn}: {len(answers)} answer(s), none used afterwards")
            continue
        # The answer used is the last one before the first use (identical answers of one
        # turn cannot be told apart; one of them must be billed).
        used = [answer for answer in answers if answer.seq < uses[0].seq][-1]
        if turn in billed:
            continue
        failures.append(
            f"model answer seq {used.seq} (turn {turn}, {_describe_usage(used)}) was used "
            f"({uses[0].what}), but the report bills no model call of turn {turn}"
        )


def _calls_reached(history: history_module.TrialHistory) -> int:
    """Logical calls that reached a tool: per (tool, arguments), its distinct keys (no key
    counts as one), at most as many as the script makes with those arguments."""
    keys: dict[facts.LogicalCall, set[str | None]] = collections.defaultdict(set)
    for request in facts.tool_requests(history):
        keys[facts.logical_call(request.tool, request.arguments)].add(request.key)
    counts = facts.scripted_counts(history)
    return sum(min(len(found), facts.allowed_calls(counts, call)) for call, found in keys.items())


def _reserved_before_asked(
    history: history_module.TrialHistory,
    answered: list[ledger.ModelRequest],
    failures: list[str],
) -> None:
    """Each answered inference had its own reservation reported before it was asked: an
    engine reports `model.pending` once the iteration is reserved, then asks. Counted as
    they happen, not only in the end's totals, where a later reservation never used (a
    twin owner's, say) would hide two answers drawn on one. Engines that report no
    `model.pending` (black boxes) are judged by the totals alone."""
    hits = facts.run_hits(history)
    reserved = [hit.seq for hit in hits if facts.point(hit) == facts.MODEL_PENDING]
    if not reserved:
        return
    for count, request in enumerate(answered, start=1):
        before = bisect.bisect_left(reserved, request.seq)
        if count > before:
            failures.append(
                f"model request seq {request.seq} (turn {request.turn}) made {count} answered "
                f"200 with {before} model.pending reported before it: an inference was not "
                "reserved"
            )
            return


def _ledger_rows(history: history_module.TrialHistory, failures: list[str]) -> None:
    rows = facts.table_rows(history, "budget_ledger")
    seen: collections.Counter[tuple[str, str]] = collections.Counter(
        (str(row.get("kind")), str(row.get("ref"))) for row in rows
    )
    for (kind, ref), count in seen.items():
        if count > 1:
            failures.append(f"budget_ledger has {count} rows for (kind {kind}, ref {ref})")


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    report = history.final_report
    if report is None:
        return verdict.decide(
            INVARIANT, failures=[], notes=[], unknowns=["no run report"], passed=""
        )
    failures: list[str] = []
    notes: list[str] = []
    unknowns: list[str] = []
    _monotonic(history.reports, failures)
    budget = report.budget
    missing = [name for name in (ITERATIONS, TOOL_CALLS, TOKENS) if name not in budget]
    if missing:
        unknowns.append(f"final report has no budget {missing}")
    # The world against the report: only a terminal report is known to be up to date.
    against: list[str] = []
    answered = facts.model_requests(history, answered_only=True)
    if ITERATIONS in budget:
        used = budget[ITERATIONS].used
        line = f"{len(answered)} model requests answered 200, iterations used {used}"
        (against if len(answered) > used else notes).append(
            line + (": an inference was not reserved" if len(answered) > used else "")
        )
    if TOOL_CALLS in budget:
        reached = _calls_reached(history)
        used = budget[TOOL_CALLS].used
        line = f"{reached} distinct calls reached the world, tool_calls used {used}"
        (against if reached > used else notes).append(
            line + (": a call was not counted" if reached > used else "")
        )
    if TOKENS in budget:
        _tokens(history, report, against, notes)
        _unbilled(history, report, against, notes)
    _reserved_before_asked(history, answered, failures)
    if report.terminal:
        failures.extend(against)
    else:
        unknowns.extend(
            f"last report is {report.status}, not terminal (the world may be ahead of it): {line}"
            for line in against
        )
    _ledger_rows(history, failures)
    if not answered and not facts.tool_requests(history) and not failures and not unknowns:
        nothing = "nothing was consumed: no model request was answered, no tool was called"
        if unproven := reach.nothing_to_judge(INVARIANT, nothing, history, notes):
            return unproven
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        unknowns=unknowns,
        passed=_held(history, report),
    )


def _held(history: history_module.TrialHistory, report: run_report.RunReport) -> str:
    """The fact a PASS rests on: each budget's final use against its limit and against what
    the world served, never lower in an earlier snapshot."""
    served = {
        ITERATIONS: f"{len(facts.model_requests(history, answered_only=True))} answered model "
        "requests",
        TOOL_CALLS: f"{_calls_reached(history)} calls that reached a tool",
        TOKENS: f"{sum(1 for c in report.model_calls if c.state == 'recorded')} recorded model "
        "calls",
    }
    uses = [
        f"{name} {report.budget[name].used} of {report.budget[name].limit} for {served[name]}"
        for name in (ITERATIONS, TOOL_CALLS, TOKENS)
        if name in report.budget
    ]
    snapshots = len(history.reports)
    plural = "s" if snapshots > 1 else ""
    return f"{', '.join(uses)}; never lower across {snapshots} report snapshot{plural}"
