"""Incident reproduction: one run of the reference engine's tables as a replayable scenario.

`scenario_from_tables` reads what the engine recorded of one run (runs, model_calls with
responses and usage, tool_calls with declarations and outcomes, deliveries, events with the
lease history) and writes a harness Scenario that replays the same model decisions and tool
results, with `faults:` inferred from the event trail, `variants:` for what the trail cannot
tell apart (harness/incident/variants.py) and a `note` explaining the inference. The tables
come from a live database (`from_dsn`, through the engine's export); a stored trial directory
knows its faults exactly (harness/incident/applied.py).
harness/INCIDENTS.md documents the format for other engines' teams.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import yaml

from harness import errors
from harness.contract import run_report
from harness.engines import commands
from harness.incident import otlp, redaction
from harness.incident import variants as variants_module
from harness.scenario import schema

Tables = dict[str, list[dict[str, Any]]]

TERMINAL_EVENTS = frozenset(
    {
        "run.succeeded",
        "run.failed",
        "run.cancelled",
        "run.dead_lettered",
        "run.budget_exhausted",
        "run.delivery_uncertain",
    }
)
TOOL_OUTCOME_EVENTS = frozenset({"tool.succeeded", "tool.failed", "tool.outcome_unknown"})
# checkpoint.saved of these phases is the commit of a boundary of its own.
CHECKPOINT_BOUNDARIES = {
    "tools_pending": "tools.pending",
    "reply_ready": "reply.ready",
    "model_ready": "model.ready",
}
# Where a worker that died (or stalled) after this durable point is struck again in a replay.
WHY = {
    "run.claimed": "it claimed the run and committed nothing more: a crash before the next "
    "durable checkpoint",
    "model.pending": "its model call was open (model.call_started) and never recorded: the "
    "call was interrupted",
    "tools.pending": "the decision was committed and no tool had started",
    "tool.started": "the tool call was marked started with no outcome: the effect may or may "
    "not have happened (kill@tool.returned replays the variant where it did)",
    "tool.settled": "a tool outcome was its last commit",
    "model.ready": "the tool round was closed and no new model call started",
    "reply.ready": "the reply was in the outbox and no delivery had started",
    "reply.sending": "the delivery was marked sending and never confirmed delivered",
}
MARKER = re.compile(r"\s*\[crashcert-run: [^\]]*\]\s*")
NAME_ALLOWED = re.compile(r"[^a-z0-9_-]+")


@dataclasses.dataclass(frozen=True)
class Inference:
    faults: list[str]
    notes: list[str]
    # Other plans the record allows (variants.py), each run by `crashcert replay`.
    variants: list[list[str]] = dataclasses.field(default_factory=list)
    # How the note begins: where the faults come from.
    source: str = "Inferred from the engine's event trail:"


# -- where the tables come from ----------------------------------------------------------


def from_dsn(dsn: str, run_id: str, *, engine_ref: str = "reference") -> Tables:
    engine = commands.find(engine_ref)
    tables = engine.export(dsn, run_id)
    if tables is None:
        raise errors.CrashcertError(f"engine {engine.name} exports no tables: nothing to replay")
    return tables


# -- tables -> scenario ------------------------------------------------------------------


def _rows(tables: Tables, name: str) -> list[dict[str, Any]]:
    rows = tables.get(name)
    if rows is None:
        raise errors.CrashcertError(f"the export has no {name!r} table: not a reference export")
    return rows


def templated(value: Any, run_key: str) -> Any:
    """Occurrences of the run key become `{run}`, so each replay's run is new to the world."""
    if not run_key:
        return value
    if isinstance(value, str):
        return value.replace(run_key, schema.RUN_KEY_PLACEHOLDER)
    if isinstance(value, list):
        return [templated(item, run_key) for item in value]
    if isinstance(value, dict):
        return {key: templated(item, run_key) for key, item in value.items()}
    return value


def _kept(value: Any, redactor: redaction.Redactor | None) -> Any:
    """`value` as recorded, or only its shape when the export is redacted."""
    return value if redactor is None else redactor.value(value)


def _message(response: Any) -> dict[str, Any]:
    """The assistant message of a recorded Chat Completions response."""
    response = otlp.json_or_text(response)
    if isinstance(response, dict) and "choices" in response:
        choices = response.get("choices") or [{}]
        message = choices[0].get("message") or {}
    else:
        message = response if isinstance(response, dict) else {}
    return message if isinstance(message, dict) else {}


def _turns(
    tables: Tables, run_key: str, *, redactor: redaction.Redactor | None, notes: list[str]
) -> list[dict[str, Any]]:
    recorded: dict[int, dict[str, Any]] = {}
    for call in _rows(tables, "model_calls"):
        if call.get("state") == "recorded":
            turn = int(call["turn"])
            if turn not in recorded or call["attempt"] > recorded[turn]["attempt"]:
                recorded[turn] = call
    if not recorded:
        raise errors.CrashcertError("the run has no recorded model call: nothing to replay")
    missing = [turn for turn in range(max(recorded) + 1) if turn not in recorded]
    if missing:
        raise errors.CrashcertError(f"no recorded model call for turn(s) {missing}")
    turns = []
    for turn in sorted(recorded):
        call = recorded[turn]
        message = _message(call.get("response"))
        usage = otlp.json_or_text(call.get("usage")) or {}
        entry: dict[str, Any] = {
            "usage": {
                "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "completion_tokens": int(usage.get("completion_tokens", 0)),
            }
        }
        tool_calls = message.get("tool_calls") or []
        if tool_calls:
            entry["tool_calls"] = []
            for item in tool_calls:
                function = item.get("function") or {}
                arguments = otlp.json_or_text(function.get("arguments") or "{}")
                if not isinstance(arguments, dict):
                    arguments = {"value": arguments}
                arguments = templated(arguments, run_key)
                entry["tool_calls"].append(
                    {
                        "id": item["id"],
                        "name": function.get("name"),
                        "arguments": _kept(arguments, redactor),
                    }
                )
        else:
            content = templated(message.get("content") or "", run_key)
            entry["content"] = _kept(content, redactor)
        turns.append(entry)
    interrupted = [
        f"turn {c['turn']} attempt {c['attempt']}"
        for c in _rows(tables, "model_calls")
        if c.get("state") in ("interrupted", "failed", "pending")
    ]
    if interrupted:
        notes.append(f"model calls not recorded (interrupted or failed): {', '.join(interrupted)}")
    return turns


def _tools(
    tables: Tables, run_key: str, *, redactor: redaction.Redactor | None, notes: list[str]
) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    results: dict[str, list[Any]] = {}
    for row in _rows(tables, "tool_calls"):
        name = row["name"]
        outcome = otlp.json_or_text(row.get("outcome"))
        if row.get("state") == "succeeded" and isinstance(outcome, dict) and "result" in outcome:
            results.setdefault(name, []).append(outcome["result"])
        if name in tools:
            continue
        declaration = otlp.json_or_text(row.get("declaration"))
        if not isinstance(declaration, dict):
            notes.append(
                f"tool {name}: no declaration recorded; assumed non_replayable write, "
                "not queryable (the strictest reading)"
            )
            declaration = {"replay": "non_replayable", "effect": "write"}
        function = declaration.get("function") or {}
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        tools[name] = {
            "name": name,
            "description": _kept(function.get("description", ""), redactor),
            "parameters": parameters if redactor is None else redactor.schema(parameters),
            "replay": declaration.get("replay", "non_replayable"),
            "effect": declaration.get("effect", "write"),
            "honours_idempotency_key": bool(declaration.get("honours_idempotency_key", False)),
            "queryable": bool(declaration.get("queryable", False)),
            "requires_approval": bool(declaration.get("requires_approval", False)),
        }
    for name, tool in tools.items():
        seen = results.get(name, [])
        if not seen:
            notes.append(f"tool {name}: no recorded result; the replay answers {{ok: true}}")
            continue
        distinct = {json.dumps(result, sort_keys=True) for result in seen}
        if len(distinct) > 1:
            notes.append(f"tool {name}: {len(distinct)} different results; the first is replayed")
        result = templated(seen[0], run_key)
        tool["behaviour"] = {"result": _kept(result, redactor)}
    return list(tools.values())


def _sink_queryable(tables: Tables, override: bool | None, notes: list[str]) -> bool:
    if override is not None:
        notes.append(f"sink queryable: {override} (given)")
        return override
    kinds = {event["kind"] for event in _rows(tables, "events")}
    if kinds & {"reply.uncertain", "run.delivery_uncertain"}:
        notes.append("sink not queryable: the run ended delivery_uncertain (inferred)")
        return False
    notes.append(
        "sink queryable: unknown from the tables, assumed true (override: --sink-queryable)"
    )
    return True


def infer_faults(events: list[dict[str, Any]], *, status: str | None = None) -> Inference:
    """Faults from the event trail: where each lease holder stopped before another took over.

    A holder loses the run without releasing it when the reconciler rescues its lease
    (run.reconciled) or another worker claims it: the holder died or stalled after its last
    durable point, and the replay kills a worker right there (`kill@POINT#N`, N counting that
    point over the whole run, as the harness counts boundary hits). A run still held when it
    was exported is stuck at its holder's last point the same way.
    """
    counts: dict[str, int] = {}
    last: dict[str, tuple[str, int, dict[str, Any], int | None]] = {}
    # The external calls' own points, counted as the harness counts their hits (a call
    # returned when the worker that started it settled it), numbered for each durable point.
    after: dict[str, int] = {}
    started: dict[str, tuple[Any, Any]] = {}
    holder: str | None = None
    faults: list[str] = []
    options: list[list[variants_module.Alternative]] = []
    notes: list[str] = []

    def lost(worker: str, how: str) -> None:
        if worker not in last:
            notes.append(f"{worker} lost the lease ({how}) before any durable point: not replayed")
            return
        point, occurrence, event, after_occurrence = last[worker]
        fault = f"kill@{point}#{occurrence}"
        faults.append(fault)
        options.append(variants_module.alternatives(fault, after_occurrence=after_occurrence))
        why = WHY.get(point, "this was its last durable point")
        notes.append(
            f"{fault}: worker {worker} stopped after {point} (event {event.get('id')} "
            f"{event['kind']}) and {how}; {why}"
        )

    for event in sorted(events, key=lambda e: e.get("id", 0)):
        kind = event["kind"]
        worker = event.get("worker_id")
        data = event.get("data") or {}
        if kind == "run.reconciled":
            owner = data.get("from_owner") or holder
            if owner:
                lost(owner, "the reconciler rescued its lease")
            holder = None
            continue
        if kind == "run.released" or kind in TERMINAL_EVENTS:
            holder = None
        point = _point_of(kind, data)
        if kind == "run.claimed":
            if holder is not None and holder != worker:
                lost(holder, f"{worker} claimed the run")
            holder = worker
        _count_returns(kind, data, event, after, started)
        if point is None:
            continue
        counts[point] = counts.get(point, 0) + 1
        if worker:
            external = variants_module.AFTER.get(point)
            numbered = after.get(external, 0) + 1 if external else None
            last[worker] = (point, counts[point], event, numbered)
    if holder is not None and status not in run_report.TERMINAL_STATUSES:
        lost(holder, f"the run was still {status or 'unfinished'} and held by it when exported")
    if not faults:
        notes.append("no lost lease in the event trail: the incident replays without a fault")
    found = variants_module.combine(faults, options)
    return Inference(faults=faults, notes=notes + found.notes, variants=found.plans)


def _count_returns(
    kind: str,
    data: dict[str, Any],
    event: dict[str, Any],
    after: dict[str, int],
    started: dict[str, tuple[Any, Any]],
) -> None:
    """Count model.returned, tool.returned and reply.sent as the harness would have seen
    them: a recorded model call, a tool call settled (not by a query) by the lease that
    started it, a delivered reply."""
    holder = (event.get("worker_id"), event.get("lease_epoch"))
    command = str(data.get("command_id"))
    if kind == "model.call_recorded":
        after["model.returned"] = after.get("model.returned", 0) + 1
    elif kind == "tool.started":
        started[command] = holder
    elif kind in TOOL_OUTCOME_EVENTS and started.get(command) == holder:
        outcome = data.get("outcome")
        if not (isinstance(outcome, dict) and outcome.get("queried")):
            after["tool.returned"] = after.get("tool.returned", 0) + 1
    elif kind == "reply.delivered":
        after["reply.sent"] = after.get("reply.sent", 0) + 1


def _point_of(kind: str, data: dict[str, Any]) -> str | None:
    if kind == "run.claimed":
        return "run.claimed"
    if kind == "model.call_started":
        return "model.pending"
    if kind == "tool.started":
        return "tool.started"
    if kind in TOOL_OUTCOME_EVENTS:
        return "tool.settled"
    if kind == "reply.sending":
        return "reply.sending"
    if kind in TERMINAL_EVENTS:
        return "run.finished"
    if kind == "checkpoint.saved":
        return CHECKPOINT_BOUNDARIES.get(str(data.get("phase")))
    return None


def _input(
    run: dict[str, Any], run_key: str, *, redactor: redaction.Redactor | None, notes: list[str]
) -> dict[str, Any]:
    messages = (otlp.json_or_text(run.get("input")) or {}).get("messages") or []
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    if not users:
        raise errors.CrashcertError("the run's input has no user message")
    if len(messages) > (2 if system is not None else 1):
        notes.append(f"the input had {len(messages)} messages; only system and first user kept")
    user = templated(MARKER.sub(" ", users[0]).strip(), run_key)
    spec: dict[str, Any] = {"user": _kept(user, redactor)}
    if system is not None:
        spec["system"] = _kept(system, redactor)
    return spec


def scenario_from_tables(
    tables: Tables,
    *,
    name: str | None = None,
    redacted: bool = False,
    sink_queryable: bool | None = None,
    source: str = "",
    faults: Inference | None = None,
) -> schema.Scenario:
    """The scenario of one exported run; `faults` when known better than the event trail
    tells (a trial's applied plan), else inferred from it."""
    runs = _rows(tables, "runs")
    if len(runs) != 1:
        raise errors.CrashcertError(f"the export holds {len(runs)} runs; expected exactly one")
    run = runs[0]
    run_id = str(run["id"])
    run_key = str(run.get("run_key") or "")
    notes: list[str] = []
    # One redactor for the whole export: argument keys stay those of the tool's schema.
    redactor = redaction.Redactor() if redacted else None
    turns = _turns(tables, run_key, redactor=redactor, notes=notes)
    tools = _tools(tables, run_key, redactor=redactor, notes=notes)
    queryable = _sink_queryable(tables, sink_queryable, notes)
    inference = faults or infer_faults(_rows(tables, "events"), status=run.get("status"))
    status = run.get("status")
    expect = "succeeded" if "content" in turns[-1] else str(status)
    if expect != "succeeded":
        notes.append(f"the last recorded turn called tools; the replay expects status {expect}")
    attempts = [f"attempts {run.get('attempts')}/{run.get('max_attempts')}"]
    data = {
        "name": name or _name(run_id),
        "description": (
            f"Replay of run {run_id}"
            + ("" if redacted else f" (run key {run_key})")
            + (f" from {source}" if source else "")
            + f"; it ended {status}"
            + (f" ({run['reason']})" if run.get("reason") and not redacted else "")
            + f", {', '.join(attempts)}."
        ),
        "input": _input(run, run_key, redactor=redactor, notes=notes),
        "budgets": {
            "iterations": int(run["budget_iterations"]),
            "tool_calls": int(run["budget_tool_calls"]),
            "tokens": int(run["budget_tokens"]),
        },
        "tools": tools,
        "turns": turns,
        "sink": {"queryable": queryable},
        "expect": {"status": expect},
        "faults": inference.faults,
        "variants": inference.variants,
        "note": _note(inference.notes + notes, redacted=redacted, source=inference.source),
    }
    return schema.parse(data, source=f"incident {run_id}")


def _note(items: list[str], *, redacted: bool, source: str) -> str:
    sentences = [item.rstrip(".") + "." for item in items]
    if redacted:
        sentences.append(
            "Prompts, tool descriptions and schemas, arguments, results and replies are "
            "redacted (same shape, object keys numbered)."
        )
    return " ".join([source, *sentences])


def _name(run_id: str) -> str:
    return NAME_ALLOWED.sub("-", f"incident-{run_id[:8]}".lower()).strip("-")[:64]


def to_yaml(scenario: schema.Scenario) -> str:
    data = scenario.model_dump(mode="json", exclude_defaults=False)
    header = "# crashcert incident replay (harness/INCIDENTS.md): crashcert replay THIS_FILE\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


# -- replay ------------------------------------------------------------------------------

REPRODUCED = "incident reproduced"
NOT_REPRODUCED = "incident no longer reproduces"
UNDECIDED = "incident replay inconclusive"


def conclusion(verdict: Any) -> str:
    """FAIL: the incident still happens; PASS: it no longer does; else: cannot tell."""
    value = getattr(verdict, "value", verdict)
    if value == "FAIL":
        return REPRODUCED
    if value == "PASS":
        return NOT_REPRODUCED
    return f"{UNDECIDED} ({value})"
