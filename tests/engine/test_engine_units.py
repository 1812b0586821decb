"""Checkpoint model, SQL file parsing, input validation, redaction, event stamping."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from typing import Any

import pytest

from reference_engine import (
    checkpoint,
    connection,
    errors,
    events,
    inputs,
    leases,
    redact,
    report,
    sqlfile,
)
from reference_engine import state as S


def test_queries_parse_into_named_blocks() -> None:
    parsed = sqlfile.parse_queries(
        "-- preamble\n-- name: one\n-- a comment\nSELECT 1;\n\n-- name: two\nSELECT\n  2\n"
    )
    assert parsed == {"one": "SELECT 1", "two": "SELECT\n  2"}


def test_duplicate_or_empty_queries_are_rejected() -> None:
    with pytest.raises(errors.ConfigError, match="twice"):
        sqlfile.parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")
    with pytest.raises(errors.ConfigError, match="empty"):
        sqlfile.parse_queries("-- name: a\n-- nothing\n")


def test_bundled_queries_and_migrations_load() -> None:
    names = sqlfile.queries()
    assert {"claim_run", "extend_lease", "settle_tool_call", "advance_frontier"} <= set(names)
    statements = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "SET"}
    assert all(sql.split()[0] in statements for sql in names.values())
    assert [m.number for m in sqlfile.migrations()] == list(range(1, len(sqlfile.migrations()) + 1))
    with pytest.raises(errors.ConfigError, match="no query named"):
        sqlfile.query("nope")


def test_checkpoint_round_trip_and_version_check() -> None:
    cp = checkpoint.initial([{"role": "user", "content": "hi"}])
    payload = checkpoint.dump(cp)
    assert payload["v"] == 1 and checkpoint.load(payload) == cp
    with pytest.raises(errors.CheckpointInvalid, match="unknown checkpoint version 7"):
        checkpoint.load({**payload, "v": 7})
    with pytest.raises(errors.CheckpointInvalid, match="unknown checkpoint version"):
        checkpoint.load(payload, checkpoint_version=2)
    with pytest.raises(errors.CheckpointInvalid, match="malformed"):
        checkpoint.load({**payload, "surprise": 1})
    with pytest.raises(errors.CheckpointInvalid, match="not an object"):
        checkpoint.load([1, 2])


def test_decision_is_exactly_one_kind() -> None:
    with pytest.raises(ValueError):
        checkpoint.Decision()
    with pytest.raises(ValueError):
        checkpoint.Decision(
            content="x", tool_calls=(checkpoint.ToolRequest(id="a", name="b", arguments="{}"),)
        )


def test_oversized_observations_are_visibly_excerpted() -> None:
    big = "x" * (checkpoint.MAX_OBSERVATION_BYTES + 10)
    short = checkpoint.excerpt(big)
    assert short.endswith(
        f"[excerpt: {checkpoint.EXCERPT_BYTES} of {len(big)} bytes; "
        "full body in tool_calls.outcome]"
    )
    assert checkpoint.excerpt("small") == "small"


def test_oversized_checkpoint_is_refused() -> None:
    huge = [{"role": "user", "content": "y" * checkpoint.MAX_CHECKPOINT_BYTES}]
    with pytest.raises(errors.CheckpointInvalid, match="exceeds"):
        checkpoint.dump(checkpoint.initial(huge))


def test_run_input_validation() -> None:
    good = {
        "run_key": "k",
        "messages": [{"role": "user", "content": "x"}],
        "budgets": {"iterations": 2, "tool_calls": 0, "tokens": 10},
        "max_attempts": 2,
    }
    assert inputs.parse(json.dumps(good)).budgets.tool_calls == 0
    with pytest.raises(errors.InvalidInput, match="not JSON"):
        inputs.parse("{")
    with pytest.raises(errors.InvalidInput, match="extra"):
        inputs.parse(json.dumps({**good, "extra": 1}))
    with pytest.raises(errors.InvalidInput, match="iterations"):
        inputs.parse(json.dumps({**good, "budgets": {"iterations": 0}}))
    big = {**good, "messages": [{"role": "user", "content": "z" * inputs.MAX_INPUT_BYTES}]}
    with pytest.raises(errors.InvalidInput, match="never shortened"):
        inputs.parse(json.dumps(big))


def test_redaction_replaces_prompts_and_outputs_by_hash_and_length() -> None:
    out = redact.redact({"content": "secret", "usage": {"total_tokens": 3}, "result": None})
    assert out["content"]["redacted"] is True and out["content"]["len"] == len('"secret"')
    assert "secret" not in json.dumps(out)
    assert out["usage"] == {"total_tokens": 3}


class Written:
    """Stands in for an open transaction: records the statements instead of running them."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, dict[str, Any]]] = []

    def all(self, query: str, /, **params: Any) -> list[connection.Row]:
        self.statements.append((query, params))
        return []


def test_events_are_stamped_by_their_lease_and_written_in_one_batch() -> None:
    written = Written()
    tx = events.Tx(typing.cast(connection.Transaction, written), redact=True)
    tx.event(leases.Lease("r-1", "w-1", 3), "reply.sending", key="k", content="secret")
    tx.event("r-2", "run.reconciled", lease_epoch=2, from_owner="w-0", to="pending")
    tx.event("r-3", "run.created", run_key="rk")
    assert written.statements == []  # buffered until just before COMMIT
    tx.flush()
    tx.flush()  # nothing left to write
    [(query, params)] = written.statements
    assert query == "insert_events"
    rows = params["events"]
    assert [(e["run_id"], e["kind"], e["worker_id"], e["lease_epoch"]) for e in rows] == [
        ("r-1", "reply.sending", "w-1", 3),
        ("r-2", "run.reconciled", None, 2),
        ("r-3", "run.created", None, None),
    ]
    assert rows[0]["data"]["key"] == "k" and rows[0]["data"]["content"]["redacted"] is True
    assert rows[1]["data"] == {"from_owner": "w-0", "to": "pending"}


def test_report_matches_the_harness_schema() -> None:
    from harness.contract import run_report

    run = S.RunState(
        run_id="r",
        status="running",
        lease_owner="w",
        lease_epoch=1,
        cancel_requested=False,
        attempts=1,
        max_attempts=3,
        frontier_version=2,
        phase="tools_pending",
        checkpoint={},
        checkpoint_version=1,
        budget=S.Budget(iterations=3, tool_calls=2, tokens=100, iterations_used=1, tokens_used=40),
        model_calls=(S.ModelCall("m", 0, 1, 1, "recorded", {"total_tokens": 40}),),
        tool_calls=(S.ToolCall("c", 0, 0, "call_1", "t", "{}", "ce-k", None, "started"),),
    )
    parsed = run_report.RunReport.model_validate_json(json.dumps(report.build(run)))
    assert parsed.delivery.state == "none" and parsed.tool_calls[0].key == "ce-k"
    assert parsed.budget["tokens"].used == 40


@pytest.mark.processes  # a fresh interpreter: the flake hunt runs it
def test_cli_commands_other_than_worker_do_not_import_openai() -> None:
    code = (
        "import sys; from reference_engine import adapter, cli, commands, maintenance, migrations;"
        "from reference_engine import reads, report, transitions;"
        "assert 'openai' not in sys.modules, 'openai imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
