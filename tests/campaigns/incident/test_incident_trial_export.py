"""`incident export --trial DIR` exports the faults the trial applied, not an inference.

Literal trial directories: a refund run whose engine tables show worker w1 stopping after
`tool.started` (the trail alone would say `kill@tool.started#2`), while the trial's plan
and its fault record say it was killed at `tool.returned#2`.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import click.testing
import pytest
import yaml

from harness import errors
from harness.cli import main
from harness.faults import spec
from harness.incident import applied, incident
from harness.planning import plan as plan_module
from harness.record import history
from harness.scenario import schema
from harness.trial import artifacts

RUN_ID = "5e0c6f0e-0000-4000-8000-00000000000a"
RUN_KEY = "refund-abc"
RETURNED = "kill@tool.returned#2"


def _call(turn: int, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "turn": turn,
        "attempt": 1,
        "state": "recorded",
        "response": json.dumps({"choices": [{"message": message}]}),
        "usage": {"prompt_tokens": 100 + turn, "completion_tokens": 10},
    }


def _tool_call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def refund_tables() -> dict[str, list[dict[str, Any]]]:
    declaration = {"function": {"name": "refund_order"}, "replay": "non_replayable"}
    events = [
        ("run.claimed", "w1", {}),
        ("model.call_started", "w1", {}),
        ("checkpoint.saved", "w1", {"phase": "tools_pending"}),
        ("tool.started", "w1", {"command_id": "c1"}),
        ("tool.succeeded", "w1", {"command_id": "c1", "outcome": {"result": {"ok": 1}}}),
        ("checkpoint.saved", "w1", {"phase": "model_ready"}),
        ("model.call_started", "w1", {}),
        ("checkpoint.saved", "w1", {"phase": "tools_pending"}),
        ("tool.started", "w1", {"command_id": "c2"}),
        ("run.claimed", "w2", {}),
        ("tool.outcome_unknown", "w2", {"command_id": "c2"}),
        ("run.succeeded", "w2", {}),
    ]
    return {
        "runs": [
            {
                "id": RUN_ID,
                "run_key": RUN_KEY,
                "status": "succeeded",
                "input": {"messages": [{"role": "user", "content": f"Refund ord-{RUN_KEY}."}]},
                "budget_iterations": 6,
                "budget_tool_calls": 4,
                "budget_tokens": 5000,
            }
        ],
        "model_calls": [
            _call(0, {"role": "assistant", "tool_calls": [_tool_call("call_lookup", "lookup")]}),
            _call(
                1, {"role": "assistant", "tool_calls": [_tool_call("call_refund", "refund_order")]}
            ),
            _call(2, {"role": "assistant", "content": "Refunded."}),
        ],
        "tool_calls": [
            {"name": "lookup", "state": "succeeded", "outcome": {"result": {"ok": 1}}},
            {"name": "refund_order", "state": "outcome_unknown", "declaration": declaration},
        ],
        "events": [
            {
                "id": n,
                "kind": kind,
                "worker_id": worker,
                "lease_epoch": 1 if worker == "w1" else 2,
                "data": data,
            }
            for n, (kind, worker, data) in enumerate(events, start=1)
        ],
    }


def _trial(
    plan: list[str],
    events: list[history.BoundaryHit | history.FaultApplied],
    *,
    tables: dict[str, list[dict[str, Any]]] | None,
) -> history.TrialHistory:
    return history.TrialHistory(
        trial_id="t-7",
        engine="reference" if tables else "blackbox-engine",
        scenario=schema.find("refund"),
        plan=[spec.parse(text) for text in plan],
        run_key=RUN_KEY,
        run_id=RUN_ID,
        events=events,
        engine_tables=tables,
    )


def _struck(label: str, *, worker: str = "w1", at: str | None = None) -> history.FaultApplied:
    step = spec.parse(label)
    where = at or f"{step.point}#{step.occurrence}"
    point, _, occurrence = where.rpartition("#")
    return history.FaultApplied(
        seq=9,
        action=step.action,
        planned=step,
        struck_at=spec.PointRef(point=point, occurrence=int(occurrence)),
        worker_id=worker,
    )


def _store(directory: pathlib.Path, trial: history.TrialHistory, verdict: str = "FAIL") -> None:
    artifacts.write_trial(directory, trial, verdicts=[], verdict=verdict, repro="crashcert run x")


def export(*args: str) -> schema.Scenario:
    result = click.testing.CliRunner().invoke(main.main, ["incident", "export", *args])
    assert result.exit_code == 0, result.output
    return schema.parse(yaml.safe_load(result.output), source="exported")


def test_the_trail_alone_would_say_started() -> None:
    found = incident.infer_faults(refund_tables()["events"], status="succeeded")
    assert found.faults == ["kill@tool.started#2"]
    # ... and says what else it cannot rule out: the refund answered, or an ack lost.
    assert found.variants == [[RETURNED], ["commit_lost@tool.started:before_commit#2"]]


def test_trial_export_keeps_the_fault_the_trial_applied(tmp_path: pathlib.Path) -> None:
    trial = _trial([RETURNED], [_struck(RETURNED)], tables=refund_tables())
    _store(tmp_path, trial)

    exported = export("--trial", str(tmp_path))

    assert exported.faults == [RETURNED]
    assert exported.variants == []  # exact: nothing to guess
    assert exported.note.startswith("The faults trial t-7 applied:")
    assert "applied it at tool.returned#2 to worker w1" in exported.note
    assert "the trial's verdict was FAIL" in exported.note
    # decisions and results still come from the engine's tables
    assert [len(turn.tool_calls) for turn in exported.turns] == [1, 1, 0]
    assert exported.input.user == "Refund ord-{run}."


def test_a_planned_fault_that_never_struck_is_left_out(tmp_path: pathlib.Path) -> None:
    never = "kill@reply.sending#1"
    failed = history.FaultApplied(
        seq=10, action="kill", planned=spec.parse(never), ok=False, note="no worker held"
    )
    trial = _trial([RETURNED, never], [_struck(RETURNED), failed], tables=refund_tables())

    found = applied.applied_faults(trial)

    assert found.faults == [RETURNED]
    assert f"{never} was planned and never struck (no worker held): left out" in found.notes


def test_a_time_kill_is_exported_where_it_landed(tmp_path: pathlib.Path) -> None:
    label = "kill@time:+0.35s#1"
    hit = history.BoundaryHit(
        seq=5,
        point="time:+0.35s",
        occurrence=1,
        run_id=RUN_ID,
        worker_id="w1",
        pid=1,
        detail={plan_module.AFTER_WORLD_POINT: "world:tool.effect#2"},
    )
    trial = _trial([label], [hit, _struck(label, at="time:+0.35s#1")], tables=refund_tables())

    found = applied.applied_faults(trial)

    assert found.faults == ["kill@world:tool.effect#2"]
    assert "replayed at world:tool.effect#2" in found.notes[0]


def test_a_black_box_trial_exports_its_own_scenario(tmp_path: pathlib.Path) -> None:
    label = "kill@world:tool.effect#2"
    trial = _trial([label], [_struck(label)], tables=None)
    _store(tmp_path, trial, verdict="PASS")

    exported = export("--trial", str(tmp_path), "--name", "bb-incident")

    refund = schema.find("refund")
    assert exported.name == "bb-incident"
    assert exported.faults == [label]
    assert exported.turns == refund.turns and exported.tools == refund.tools
    assert "stored no tables" in exported.note
    with pytest.raises(errors.CrashcertError, match="redact"):
        applied.scenario_from_trial(tmp_path, redacted=True)


def test_not_a_trial_directory(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.CrashcertError, match=r"no history\.jsonl"):
        applied.scenario_from_trial(tmp_path)
