"""frontier.monotonic."""

from __future__ import annotations

from typing import Any

from harness.checkers import frontier, verdict
from tests.checkers import builders

V = verdict.Verdict


def rows(*phases: str, start: int = 1) -> list[dict[str, Any]]:
    return [
        {"run_id": builders.RUN_ID, "version": start + index, "phase": phase}
        for index, phase in enumerate(phases)
    ]


CLEAN_ROWS = rows("model_pending", "tools_pending", "model_ready", "model_pending", "reply_ready")


def test_clean_passes() -> None:
    result = frontier.check(builders.clean())
    assert result.verdict is V.PASS
    assert "hits and 0 checkpoint rows with a frontier judged" in builders.evidence(result)


def test_reachable_in_exact_steps() -> None:
    assert frontier.reachable("model_ready", 1) == {"model_pending"}
    assert frontier.reachable("tools_pending", 2) == {
        "tools_pending",
        "model_ready",
        "model_pending",
    }
    assert "reply_ready" not in frontier.reachable("tools_pending", 1)


def test_a_version_going_down_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.version -= 2  # a worker resumed from an older checkpoint
    low = trial.claim("w-2")
    result = frontier.check(trial.build())
    assert result.verdict is V.FAIL
    assert "hits: version went down from 3 (model.ready#1" in result.summary
    assert f"to 1 (run.claimed#2 by w-2 (hit seq {low.seq}" in result.summary


def test_a_disallowed_transition_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.checkpoint("reply.ready", "reply_ready")  # tools_pending -> reply_ready
    result = frontier.check(trial.build())
    assert result.verdict is V.FAIL
    assert "hits: tools_pending v5" in result.summary
    assert "-> reply_ready v6" in result.summary
    assert "is not an allowed transition" in result.summary


def test_model_ready_twice_is_not_allowed() -> None:
    trial = builders.first_round(builders.Trial())
    trial.close_round()
    result = frontier.check(trial.build())
    assert result.verdict is V.FAIL
    assert "model_ready v3" in result.summary and "-> model_ready v4" in result.summary


def test_one_version_with_two_phases_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.phase = "model_pending"  # changed without a new version
    trial.hit("run.claimed", worker="w-2")
    assert frontier.check(trial.build()).verdict is V.FAIL


def test_without_detail_or_table_is_inconclusive() -> None:
    result = frontier.check(builders.without_detail(builders.clean()))
    assert result.verdict is V.INCONCLUSIVE
    assert "no hit carries detail.frontier_version" in result.summary


def test_checkpoint_table_alone_is_enough() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {"checkpoints": CLEAN_ROWS}
    result = frontier.check(builders.without_detail(trial.build()))
    assert result.verdict is V.PASS
    assert "0 hits and 5 checkpoint rows" in builders.evidence(result)


def test_checkpoint_versions_must_be_unique_and_contiguous() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {
        "checkpoints": [*rows("model_pending", "tools_pending"), *rows("model_ready", start=2)]
    }
    history = builders.without_detail(trial.build())
    assert frontier.check(history).summary.startswith(
        "checkpoints: versions [2] appear more than once"
    )
    trial.engine_tables = {"checkpoints": [*rows("model_pending"), *rows("model_ready", start=3)]}
    result = frontier.check(builders.without_detail(trial.build()))
    assert result.summary == "checkpoints: versions not contiguous from 1, missing [2]"


def test_checkpoint_phases_must_follow_the_transitions() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {"checkpoints": rows("model_pending", "model_ready")}
    result = frontier.check(builders.without_detail(trial.build()))
    assert result.verdict is V.FAIL
    assert result.summary == (
        "checkpoints: model_pending v1 (checkpoint v1) -> model_ready v2 (checkpoint v2) is not "
        "an allowed transition"
    )


def test_report_snapshots_going_back_fail() -> None:
    trial = builders.clean_trial()
    trial.reports.insert(
        0,
        trial.reports[-1].model_copy(
            update={"frontier": trial.reports[-1].frontier.model_copy(update={"version": 99})}
        ),
    )
    result = frontier.check(trial.build())
    assert result.verdict is V.FAIL
    assert "reports: version went down from 99" in result.summary


def test_a_late_acknowledgement_is_placed_where_its_commit_was_sent() -> None:
    """w-1's decision (v5) committed before w-2 claimed, but its answer crossed a slow link
    and arrived after w-2's v6 and v7: by report order the version went down; it did not."""
    trial = builders.first_round(builders.Trial())
    trial.model_call(1)
    trial.hit("tools.pending:before_commit", turn=1)
    decided = {"frontier_version": trial.version + 1, "phase": "tools_pending"}
    trial.version += 1
    trial.phase = "tools_pending"
    trial.claim("w-2")
    trial.run_tool("call_refund")
    trial.close_round()
    trial.hit("tools.pending", worker="w-1", **decided)
    result = frontier.check(trial.build())
    assert result.verdict is V.PASS, result.summary


def test_a_stale_commit_sent_after_newer_ones_still_fails() -> None:
    trial = builders.first_round(builders.Trial())
    trial.claim("w-2")
    trial.model_turn(1)
    trial.hit("tools.pending:before_commit", worker="w-1")  # COMMIT sent after v6 landed
    stale = trial.hit("tools.pending", worker="w-1", frontier_version=4, phase="model_ready")
    result = frontier.check(trial.build())
    assert result.verdict is V.FAIL
    assert f"to 4 (tools.pending#{stale.occurrence} by w-1 (hit seq {stale.seq}" in result.summary


# --- a PASS states the fact it rests on ----------------------------------------------------


def test_pass_names_the_versions_each_source_went_through() -> None:
    trial = builders.clean_trial()
    trial.engine_tables = {
        "checkpoints": [
            {"run_id": builders.RUN_ID, "version": version, "phase": phase}
            for version, phase in enumerate(["model_pending", "tools_pending", "model_ready"], 1)
        ]
    }
    committed = [
        e
        for e in trial.events
        if getattr(e, "detail", {}).get("frontier_version") is not None
        and not e.point.endswith(":before_commit")
    ]
    assert frontier.check(trial.build()).summary == (
        f"{len(committed)} committed hits from v0 to v{trial.version}, each step an allowed "
        "transition; 3 checkpoint rows from v1 to v3, each step an allowed transition; "
        "1 report snapshot never lower"
    )
