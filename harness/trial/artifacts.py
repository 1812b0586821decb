"""Trial directories: everything needed to understand, re-check and rerun one trial.

<out>/<scenario>/<label>/
    scenario.yaml   the scenario as run
    meta.json       seed, plan, command line, git revision, engine, timings, isolation,
                    containment
    history.jsonl   the TrialHistory as JSON lines (header, events, ledgers, reports)
    workers/*.log   each worker's output
    verdicts.json   each invariant's verdict and evidence
    repro.txt       one command that reruns exactly this trial
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import re
import sys
from typing import Any

import yaml

from harness import errors, provenance
from harness.inputs import readers
from harness.lab import isolation
from harness.lab.postgres import dsn
from harness.record import history

HEADER_FIELDS = (
    "trial_id",
    "engine",
    "scenario",
    "plan",
    "seed",
    "declared_boundaries",
    "run_key",
    "run_id",
    "started_at",
    "workers_started_at",
    "healed_at",
    "finished_at",
    "ended_at",
    "harness_error",
    "interrupted",
    "containment",
)
STREAMS = {
    "event": "events",
    "model": "model",
    "tool": "tools",
    "sink": "sink",
    "report": "reports",
    "foreign": "foreign",
}

# libyaml's dumper when PyYAML has it: the pure-Python one took ~25 ms per trial.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@#-]+", "_", text).strip("_") or "trial"


def claim_directory(wanted: pathlib.Path) -> pathlib.Path:
    """A directory of its own for one trial: `wanted`, or `wanted~2`, `wanted~3`... when
    trials of one command share a label (a replay's repeated steps, concurrent trials), so
    that none overwrites another. Made here (0700), atomically: two trials never get one."""
    wanted.parent.mkdir(parents=True, exist_ok=True)
    for number in itertools.count(1):
        candidate = wanted if number == 1 else wanted.with_name(f"{wanted.name}~{number}")
        try:
            candidate.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable")


def _atomic(path: pathlib.Path, text: str) -> None:
    """Whole or not at all: a full disk or a kill never leaves a truncated result file."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with temporary.open("w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise errors.CrashcertError(f"{path}: cannot write: {error.strerror}") from None


def write_history(path: pathlib.Path, trial: history.TrialHistory) -> None:
    _atomic(path, "".join(history_lines(trial)))


def history_lines(trial: history.TrialHistory) -> list[str]:
    data = trial.model_dump(mode="json")
    header = {"type": "header", **{name: data[name] for name in HEADER_FIELDS}}
    lines = [json.dumps(header) + "\n"]
    for line_type, field in STREAMS.items():
        lines.extend(json.dumps({"type": line_type, "item": item}) + "\n" for item in data[field])
    if data["engine_tables"] is not None:
        lines.append(json.dumps({"type": "engine_tables", "tables": data["engine_tables"]}) + "\n")
    return lines


def read_history(path: pathlib.Path) -> history.TrialHistory:
    fields: dict[str, Any] = {field: [] for field in STREAMS.values()}
    fields["engine_tables"] = None
    text = readers.read_text(path, what="history", max_bytes=readers.MAX_HISTORY_BYTES)
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            record = readers.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                raise ValueError("a history line is a JSON object with a type")
            kind = record["type"]
            if kind == "header":
                fields.update({key: value for key, value in record.items() if key != "type"})
            elif kind == "engine_tables":
                fields["engine_tables"] = record["tables"]
            else:
                fields[STREAMS[kind]].append(record["item"])
        except KeyError as error:  # a type we do not know, or its item missing
            raise errors.CrashcertError(
                f"{path}:{number}: not a history line: no {error} known or given"
            ) from None
        except (ValueError, TypeError) as error:
            raise errors.CrashcertError(f"{path}:{number}: not a history line: {error}") from None
    try:
        return history.TrialHistory.model_validate(fields)
    except ValueError as error:
        raise errors.CrashcertError(f"{path}: invalid history: {error}") from None


def write_trial(
    directory: pathlib.Path,
    trial: history.TrialHistory,
    *,
    verdicts: list[dict[str, Any]],
    verdict: str,
    repro: str,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)  # another local user reads neither the history nor the logs
    _atomic(
        directory / "scenario.yaml",
        yaml.dump(trial.scenario.model_dump(mode="json"), Dumper=_DUMPER, sort_keys=False),
    )
    meta = {
        "trial_id": trial.trial_id,
        "engine": trial.engine,
        "scenario": trial.scenario.name,
        "plan": [step.model_dump(mode="json") for step in trial.plan],
        "seed": trial.seed,
        # Stored for anyone who can read the trial: a --pg-dsn password must not come along.
        "command_line": dsn.redact_argv(sys.argv),
        "crashcert_version": provenance.version(),
        "git_revision": provenance.git_revision(),
        # Whether the lab had a private network (harness/lab/isolation.py) or was reachable.
        "isolation": isolation.current().used,
        # What held the workers' processes, and what they left behind (lab/containment.py).
        "containment": trial.containment,
        "verdict": verdict,
        "interrupted": trial.interrupted,
        "duration_s": round(trial.ended_at - trial.started_at, 3),
    }
    _atomic(directory / "meta.json", json.dumps(meta, indent=2) + "\n")
    write_history(directory / "history.jsonl", trial)
    _atomic(
        directory / "verdicts.json",
        json.dumps({"verdict": verdict, "invariants": verdicts}, indent=2) + "\n",
    )
    _atomic(directory / "repro.txt", repro + "\n")


def find_trials(root: pathlib.Path) -> list[pathlib.Path]:
    """A trial directory, or every trial directory below `root`."""
    if (root / "history.jsonl").exists():
        return [root]
    found = sorted(path.parent for path in root.rglob("history.jsonl"))
    if not found:
        raise errors.CrashcertError(f"{root}: no trial directory (history.jsonl) found")
    return found
