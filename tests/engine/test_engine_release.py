"""The reference engine's next release (engine.yaml `upgrade`): checkpoint format 2 and its
migration sql/next/004. The current release is untouched by it; the next one writes format
2 and still reads the format 1 that runs started before the upgrade carry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from reference_engine import checkpoint, errors, migrations, sqlfile

TRANSCRIPT = [{"role": "user", "content": "[crashcert-run: k] hi"}]


@pytest.fixture
def next_release() -> Iterator[None]:
    checkpoint.use_release("next")
    yield
    checkpoint.use_release("current")


def _turn_two() -> checkpoint.Checkpoint:
    decision = checkpoint.Decision(
        tool_calls=(checkpoint.ToolRequest(id="c1", name="refund_order", arguments="{}"),)
    )
    return checkpoint.Checkpoint(transcript=tuple(TRANSCRIPT), turn=2, decision=decision)


def test_the_current_release_writes_format_1_and_refuses_format_2() -> None:
    point = _turn_two()
    assert checkpoint.written_format() == 1 and checkpoint.dump(point)["v"] == 1
    newer = checkpoint.to_format_2(checkpoint.dump(point))
    with pytest.raises(errors.CheckpointInvalid, match="unknown checkpoint version 2"):
        checkpoint.load(newer, checkpoint_version=2)


def test_the_next_release_writes_format_2_and_reads_both(next_release: None) -> None:
    point = _turn_two()
    payload = checkpoint.dump(point)
    assert checkpoint.written_format() == 2
    assert payload["v"] == 2 and "turn" not in payload
    assert payload["turn_state"]["turn"] == 2
    assert checkpoint.load(payload, checkpoint_version=2) == point
    # a run started before the upgrade: format 1, read as what it was
    checkpoint.use_release("current")
    older = checkpoint.dump(point)
    checkpoint.use_release("next")
    assert checkpoint.load(older, checkpoint_version=1) == point


def test_a_format_2_payload_without_its_turn_state_is_refused(next_release: None) -> None:
    payload = checkpoint.dump(_turn_two())
    del payload["turn_state"]
    with pytest.raises(errors.CheckpointInvalid, match="without a whole turn_state"):
        checkpoint.load(payload, checkpoint_version=2)
    # nor is a turn_state missing a field filled with a default (turn 0 would replay turns)
    payload = checkpoint.dump(_turn_two())
    del payload["turn_state"]["turn"]
    with pytest.raises(errors.CheckpointInvalid, match="without a whole turn_state"):
        checkpoint.load(payload, checkpoint_version=2)
    # nor is a payload whose column names another format
    with pytest.raises(errors.CheckpointInvalid, match="column 1"):
        checkpoint.load(checkpoint.dump(_turn_two()), checkpoint_version=1)


def test_the_next_release_numbers_its_migration_after_the_current_ones() -> None:
    current = sqlfile.migrations()
    upgraded = sqlfile.migrations(release="next")
    assert upgraded[: len(current)] == current
    assert [(m.number, m.name) for m in upgraded[len(current) :]] == [
        (len(current) + 1, "checkpoint_format_2")
    ]
    with pytest.raises(errors.ConfigError, match="unknown release"):
        checkpoint.use_release("previous")


@pytest.mark.postgres
def test_the_next_release_migration_refuses_a_frontier_naming_its_format_wrongly(
    engine_db: str,
) -> None:
    """Applied once, after the current release's; then a payload whose "v" disagrees with
    its column, or a format no release reads, cannot be stored."""
    from reference_engine import commands, connection, inputs

    db = connection.Connector(engine_db)
    try:
        run_id, _ = commands.create_run(
            db,
            inputs.RunInput.model_validate(
                {
                    "run_key": "k-release",
                    "messages": TRANSCRIPT,
                    "budgets": {"iterations": 3, "tool_calls": 2, "tokens": 1000},
                }
            ),
        )
        assert migrations.migrate(db, release="next") == ["004_checkpoint_format_2"]
        assert migrations.migrate(db, release="next") == []
    finally:
        db.close()
    advance = (
        "UPDATE frontiers SET version = version + 1, phase = 'model_pending',"
        " checkpoint_version = %s,"
        " checkpoint = jsonb_set(checkpoint, '{v}', %s::jsonb) WHERE run_id = %s"
    )
    with psycopg.connect(engine_db, autocommit=True) as conn:
        for column, v in ((2, 1), (3, 3)):
            with pytest.raises(psycopg.errors.CheckViolation, match="frontiers_format_known"):
                conn.execute(advance, (column, json.dumps(v), run_id))
        conn.execute(advance, (2, json.dumps(2), run_id))  # named once, and known


def test_the_cli_takes_the_release_before_its_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reference_engine", "--release", "previous", "migrate"],
        capture_output=True,
        text=True,
        check=False,
        env={"DATABASE_URL": "postgresql://unused"},
    )
    assert result.returncode == 2 and "invalid choice: 'previous'" in result.stderr
