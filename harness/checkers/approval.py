"""`tool.approval`: a tool that requires approval reaches the world only after the harness
approved the call (a scenario's `actions`), and never once it was rejected.

A request is judged against the sequence clock taken just before the approve command was
sent: a request recorded before it cannot be the approval's doing.
"""

from __future__ import annotations

from harness.checkers import facts, verdict
from harness.record import history as history_module

INVARIANT = "tool.approval"


def check(history: history_module.TrialHistory) -> verdict.CheckResult:
    gated = {tool.name for tool in history.scenario.tools if tool.requires_approval}
    calls = {
        call_id: scripted
        for call_id, scripted in facts.scripted_calls(history).items()
        if scripted.call.tool in gated
    }
    decided = {taken.call: taken for taken in history.actions() if taken.ok and taken.call}
    failures: list[str] = []
    notes: list[str] = []
    for call_id, scripted in sorted(calls.items()):
        requests = [
            request
            for request in facts.tool_requests(history)
            if facts.logical_call(request.tool, request.arguments) == scripted.call
        ]
        taken = decided.get(call_id)
        seqs = [request.seq for request in requests]
        if taken is None:
            if requests:
                failures.append(
                    f"{call_id} ({scripted.call.tool}) requires approval and reached the tool "
                    f"without one: request seq {seqs}"
                )
            else:
                notes.append(f"{call_id}: never decided, never reached the tool")
        elif taken.do == "reject":
            if requests:
                failures.append(
                    f"{call_id} ({scripted.call.tool}) was rejected (seq {taken.requested_seq}) "
                    f"and reached the tool anyway: request seq {seqs}"
                )
            else:
                notes.append(f"{call_id}: rejected, never reached the tool")
        else:
            early = [seq for seq in seqs if seq < taken.requested_seq]
            if early:
                failures.append(
                    f"{call_id} ({scripted.call.tool}) reached the tool at seq {early}, before "
                    f"its approval was sent (seq {taken.requested_seq})"
                )
            else:
                notes.append(
                    f"{call_id}: approved at seq {taken.requested_seq}, requests after it {seqs}"
                )
    return verdict.decide(
        INVARIANT,
        failures=failures,
        notes=notes,
        passed=(
            f"{len(calls)} call(s) of tools that require approval, none before its approval"
            if calls
            else "the script calls no tool that requires approval"
        ),
    )
