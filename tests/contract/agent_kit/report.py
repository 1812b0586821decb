"""The RunReport (harness/CONTRACT.md, `status`) an example agent saves with its run."""

from __future__ import annotations

from typing import Any

from agent_kit import store


def run_report(
    run_key: str,
    usages: list[dict[str, int]],
    iterations: int,
    tool_calls: list[dict[str, Any]],
    tool_count: int,
    budgets: dict[str, int],
) -> dict[str, Any]:
    """`usages`: one Chat Completions usage per recorded model answer, in turn order."""
    model_calls = [{"turn": t, "state": "recorded", "usage": u} for t, u in enumerate(usages)]
    return {
        "v": 1,
        "run_id": run_key,
        "status": "running",
        "frontier": {"phase": None, "version": 0},
        "delivery": {"state": "none"},
        "model_calls": model_calls,
        "tool_calls": tool_calls,
        "budget": {
            "iterations": {"used": iterations, "limit": budgets["iterations"]},
            "tool_calls": {"used": tool_count, "limit": budgets["tool_calls"]},
            "tokens": {"used": sum(u["total_tokens"] for u in usages), "limit": budgets["tokens"]},
        },
    }


def from_tables(
    run_key: str, usages: list[dict[str, int]], turns: dict[str, int], budgets: dict[str, int]
) -> dict[str, Any]:
    """A hardened run's report from the agent's tables: the recorded answers' usages (in
    turn order), the journal's calls, each with the turn whose answer asked for it (`turns`:
    call id -> turn; one no answer names is put on the last turn), and the model attempts
    reserved, which count an answer lost in a crash that no table recorded."""
    calls = [
        {**call, "turn": turns.get(call["id"], len(usages) - 1)}
        for call in store.tool_calls(run_key)
    ]
    iterations = max(store.model_attempts(run_key), len(usages))
    return run_report(run_key, usages, iterations, calls, len(calls), budgets)
