"""A stored trial as an incident: the faults it really applied, not an inference.

A trial directory records its plan and every fault it applied with the hit it struck at
(history.jsonl; meta.json repeats the plan). The export keeps each planned step that struck,
as the trial's rerun line plans it (a time kill strikes again at the world point it landed
after), and says in the note which hit and worker each one struck. The model decisions and
tool results come from the engine tables the trial stored, as for `--dsn`; a trial of an
engine that exports none (a black box) gives back its own scenario.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from harness import errors
from harness.incident import incident
from harness.planning import plan
from harness.record import history
from harness.scenario import schema
from harness.trial import artifacts


def read(directory: pathlib.Path) -> tuple[history.TrialHistory, dict[str, Any]]:
    """The trial's history and meta.json ({} when it has none)."""
    path = directory / "history.jsonl"
    if not path.exists():
        raise errors.CrashcertError(f"{directory}: not a trial directory (no history.jsonl)")
    trial = artifacts.read_history(path)
    try:
        meta = json.loads((directory / "meta.json").read_text())
    except (OSError, ValueError):
        meta = {}
    return trial, meta if isinstance(meta, dict) else {}


def applied_faults(
    trial: history.TrialHistory, *, meta: dict[str, Any] | None = None
) -> incident.Inference:
    """Each planned step that struck, as its rerun plans it; a note per step, struck or not."""
    faults: list[str] = []
    notes: list[str] = []
    records = trial.faults()
    for step in trial.plan:
        struck = [fault for fault in records if fault.ok and fault.planned == step]
        if not struck:
            failed = [f.note for f in records if not f.ok and f.planned == step and f.note]
            why = f" ({failed[0]})" if failed else ""
            notes.append(f"{step.label()} was planned and never struck{why}: left out")
            continue
        rerun = plan.rerun_step(trial, step)
        faults.append(rerun.label())
        first = struck[0]
        where = first.struck_at.label() if first.struck_at else step.point
        who = f"worker {first.worker_id}" if first.worker_id else "a worker"
        again = "" if rerun == step else f"; replayed at {rerun.point}#{rerun.occurrence}"
        notes.append(f"{step.label()}: the trial applied it at {where} to {who}{again}")
    if not trial.plan:
        notes.append("the trial had no fault: the incident replays without one")
    verdict = (meta or {}).get("verdict")
    if verdict:
        notes.append(f"the trial's verdict was {verdict}")
    return incident.Inference(
        faults=faults, notes=notes, source=f"The faults trial {trial.trial_id} applied:"
    )


def scenario_from_trial(
    directory: pathlib.Path,
    *,
    name: str | None = None,
    redacted: bool = False,
    sink_queryable: bool | None = None,
) -> schema.Scenario:
    trial, meta = read(directory)
    faults = applied_faults(trial, meta=meta)
    source = f"trial {directory}"
    if trial.engine_tables:
        return incident.scenario_from_tables(
            trial.engine_tables,
            name=name,
            redacted=redacted,
            sink_queryable=sink_queryable,
            source=source,
            faults=faults,
        )
    if redacted:
        raise errors.CrashcertError(
            f"{directory}: engine {trial.engine} stored no tables; its scenario is kept as "
            "run, so --redact has nothing of the engine's to redact from"
        )
    scenario = trial.scenario
    kept = f"Engine {trial.engine} stored no tables: the trial's own scenario is replayed."
    note = " ".join([faults.source, *(item.rstrip(".") + "." for item in faults.notes), kept])
    data = scenario.model_dump(mode="json")
    data.update(
        name=name or scenario.name,
        description=f"Replay of trial {trial.trial_id} ({source}).",
        faults=faults.faults,
        variants=[],
        note=note,
    )
    if sink_queryable is not None:
        data["sink"] = {**data["sink"], "queryable": sink_queryable}
    return schema.parse(data, source=f"trial {trial.trial_id}")
