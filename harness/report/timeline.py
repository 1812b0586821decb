"""Timeline reports: one self-contained HTML page per trial, and one for a whole matrix.

The pages are Jinja2 templates (harness/report/templates/*.html) with autoescape always on:
the engine and the world control much of what they show (stderr, run reports, tool arguments,
replies). A page needs no network: CSS and JavaScript (templates/timeline.*) are inlined and
the trial's lanes travel as JSON inside the page; the script draws them as inline SVG.
Lanes: one per worker (boundary hits, faults that struck it, start/exit), Postgres (restart
and start), the model's calls, tool requests and queries, tool effects, reply requests and
queries, deliveries. Below: each invariant's verdict, failing ones with their evidence, and
the one command that reruns the trial.

Stable hooks for tests and tools: `section.trial[data-trial][data-verdict]`, `.lane[data-lane]`,
`.event.boundary`, `.event.fault.<action>`, `tr.invariant[data-invariant][data-verdict]`,
`.verdict.<VERDICT>`, `li.evidence[data-seqs]`, `pre.repro`, `table.matrix td.cell`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import pathlib
import re
from typing import Any

import jinja2
import markupsafe

from harness import errors
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import spec
from harness.planning import plan
from harness.record import history
from harness.report import grid
from harness.trial import artifacts
from harness.world import ledger

TRIAL_PAGE = "timeline.html"
MATRIX_PAGE = "report.html"
TEMPLATES = pathlib.Path(__file__).resolve().parent / "templates"
# Numbers that follow "seq" in evidence ("request seq 12", "seq 3, 4") name ledger/event records.
SEQ_MENTION = re.compile(r"\bseq\s+\[?((?:\d+(?:,\s*)?)+)")
# Faults that live in the Postgres lane rather than in the lane of the worker that hit the point.
SERVER_FAULTS = spec.SHARED | spec.SHARED_ENDINGS


@dataclasses.dataclass(frozen=True)
class TrialView:
    """What a report shows of one trial (from a TrialOutcome, or read back from its directory)."""

    history: history.TrialHistory
    results: list[verdict_module.CheckResult]
    verdict: verdict_module.Verdict
    repro: str
    directory: pathlib.Path | None = None

    @property
    def label(self) -> str:
        return plan.plan_label(self.history.plan)

    @property
    def anchor(self) -> str:
        return "trial-" + re.sub(r"[^A-Za-z0-9_-]+", "-", self.history.trial_id)

    @property
    def row(self) -> str:
        return grid.row_of(self.history.plan)


def view_of_outcome(outcome: Any) -> TrialView:
    """A harness.trial.runner.TrialOutcome as a view (duck-typed: this module imports no runner)."""
    return TrialView(
        history=outcome.history,
        results=list(outcome.results),
        verdict=outcome.verdict,
        repro=outcome.repro,
        directory=outcome.directory,
    )


def load_view(directory: pathlib.Path) -> TrialView:
    """Read a stored trial directory (history.jsonl, verdicts.json, repro.txt)."""
    trial = artifacts.read_history(directory / "history.jsonl")
    try:
        stored = json.loads((directory / "verdicts.json").read_text())
        results = [verdict_module.CheckResult.model_validate(r) for r in stored["invariants"]]
        verdict = verdict_module.Verdict(stored["verdict"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise errors.CrashcertError(f"{directory}: unreadable verdicts.json: {error}") from None
    try:
        repro = (directory / "repro.txt").read_text().strip()
    except OSError:
        repro = ""
    return TrialView(
        history=trial, results=results, verdict=verdict, repro=repro, directory=directory
    )


# -- lanes ---------------------------------------------------------------------------------


def _event(
    record: history.Record | ledger.Entry, label: str, classes: list[str], details: list[str]
) -> dict[str, Any]:
    return {
        "seq": record.seq,
        "t": record.t,
        "label": label,
        "classes": classes,
        "title": "\n".join([f"seq {record.seq}  t={record.t:.3f}  {label}", *details]),
    }


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lanes(trial: history.TrialHistory) -> list[dict[str, Any]]:
    """The trial as lanes of events, in the order the page draws them."""
    workers: dict[str, list[dict[str, Any]]] = {}
    server: list[dict[str, Any]] = []
    harness_lane: list[dict[str, Any]] = []

    def worker_lane(worker_id: str | None) -> list[dict[str, Any]]:
        if worker_id is None:
            return harness_lane
        return workers.setdefault(worker_id, [])

    for event in trial.events:
        if isinstance(event, history.BoundaryHit):
            before = event.point.endswith(boundaries.BEFORE_COMMIT_SUFFIX)
            classes = ["event", "boundary", *(["before-commit"] if before else [])]
            details = [f"run {event.run_id}", f"pid {event.pid}"]
            details += [f"{key}: {_short(value)}" for key, value in event.detail.items()]
            label = f"{event.point}#{event.occurrence}"
            worker_lane(event.worker_id).append(_event(event, label, classes, details))
        elif isinstance(event, history.FaultApplied):
            classes = ["event", "fault", event.action, *([] if event.ok else ["not-applied"])]
            label = event.action + (f" ({event.step})" if event.step else "")
            details = [f"worker {event.worker_id}", f"ok {event.ok}", event.note]
            target = server if event.action in SERVER_FAULTS else worker_lane(event.worker_id)
            target.append(_event(event, label, classes, details))
        elif isinstance(event, history.ActionTaken):  # approve/reject/cancel from outside
            classes = ["event", "action", *([] if event.ok else ["not-applied"])]
            label = f"{event.do} {event.call or ''}".strip()
            details = [f"at {event.at}", f"ok {event.ok}", event.note]
            harness_lane.append(_event(event, label, classes, details))
        else:
            classes = ["event", "worker", event.event]
            label = f"worker {event.event}"
            details = [f"pid {event.pid}", f"returncode {event.returncode}"]
            worker_lane(event.worker_id).append(_event(event, label, classes, details))

    model_lane = [_model_event(entry) for entry in trial.model]
    tool_lane: list[dict[str, Any]] = []
    effect_lane: list[dict[str, Any]] = []
    for entry in trial.tools:
        (effect_lane if isinstance(entry, ledger.ToolEffect) else tool_lane).append(
            _tool_event(entry)
        )
    reply_lane: list[dict[str, Any]] = []
    delivery_lane: list[dict[str, Any]] = []
    for item in trial.sink:
        (delivery_lane if isinstance(item, ledger.ReplyDelivery) else reply_lane).append(
            _sink_event(item)
        )

    out = [
        {
            "id": f"worker:{worker_id}",
            "label": f"worker {worker_id}",
            "kind": "worker",
            "events": events,
        }
        for worker_id, events in workers.items()
    ]
    for lane_id, label, kind, events in (
        ("harness", "harness", "harness", harness_lane),
        ("postgres", "postgres", "postgres", server),
        ("model", "model calls", "model", model_lane),
        ("tools", "tool requests", "tools", tool_lane),
        ("effects", "tool effects", "effects", effect_lane),
        ("replies", "reply requests", "replies", reply_lane),
        ("deliveries", "deliveries", "deliveries", delivery_lane),
    ):
        if events or kind in ("model", "tools", "effects", "replies", "deliveries"):
            out.append({"id": lane_id, "label": label, "kind": kind, "events": events})
    return out


def _model_event(entry: ledger.ModelRequest) -> dict[str, Any]:
    classes = ["event", "model", *([] if entry.status_code == 200 else ["failed"])]
    if entry.problems:
        classes.append("problem")
    details = [f"status {entry.status_code}", f"usage {_short(entry.usage)}"]
    if entry.response is not None:
        calls = [c.get("function", {}).get("name") for c in entry.response.get("tool_calls") or []]
        details.append(f"tool calls {calls}" if calls else f"content {_short(entry.response)}")
    details += [f"problem: {problem}" for problem in entry.problems]
    if entry.error:
        details.append(f"error: {entry.error}")
    return _event(entry, f"model turn {entry.turn}", classes, details)


def _tool_event(entry: ledger.ToolEntry) -> dict[str, Any]:
    if isinstance(entry, ledger.ToolRedeploy):
        details = [f"version {entry.version}", f"fingerprint {entry.fingerprint}"]
        details.append(
            "at the engine's upgrade"
            if entry.after_request_seq is None
            else f"after request seq {entry.after_request_seq}"
        )
        return _event(entry, f"redeploy {entry.tool}", ["event", "tool", "redeploy"], details)
    if isinstance(entry, ledger.ToolEffect):
        details = [f"key {entry.key}", f"arguments {_short(entry.arguments)}"]
        details.append(f"request seq {entry.request_seq}")
        return _event(entry, f"effect {entry.tool}", ["event", "tool", "effect"], details)
    if isinstance(entry, ledger.ToolQuery):
        classes = ["event", "tool", "query", "found" if entry.found else "not-found"]
        details = [f"key {entry.key}", f"found {entry.found}", f"status {entry.status_code}"]
        return _event(entry, f"query {entry.tool}", classes, details)
    classes = ["event", "tool", "request", entry.outcome.replace("_", "-")]
    if entry.status_code != 200:
        classes.append("failed")
    details = [f"key {entry.key}", f"status {entry.status_code}", f"outcome {entry.outcome}"]
    details += [f"arguments {_short(entry.arguments)}", f"result {_short(entry.result)}"]
    return _event(entry, f"request {entry.tool}", classes, details)


def _sink_event(
    item: ledger.ReplyRequest | ledger.ReplyDelivery | ledger.ReplyQuery,
) -> dict[str, Any]:
    if isinstance(item, ledger.ReplyDelivery):
        details = [f"key {item.key}", f"content {_short(item.content)}"]
        return _event(item, "delivery", ["event", "reply", "delivery"], details)
    if isinstance(item, ledger.ReplyQuery):
        classes = ["event", "reply", "query", "found" if item.found else "not-found"]
        details = [f"key {item.key}", f"found {item.found}", f"status {item.status_code}"]
        return _event(item, "reply query", classes, details)
    classes = ["event", "reply", "request", item.outcome]
    details = [f"key {item.key}", f"status {item.status_code}", f"outcome {item.outcome}"]
    return _event(item, "reply request", classes, details)


def timeline_data(trial: history.TrialHistory) -> dict[str, Any]:
    drawn = lanes(trial)
    times = [event["t"] for lane in drawn for event in lane["events"]]
    start = min(times, default=trial.started_at)
    end = max(times, default=trial.ended_at)
    return {
        "trial": trial.trial_id,
        "t0": start,
        "t1": end if end > start else start + 1.0,
        "healed_at": trial.healed_at,
        "finished_at": trial.finished_at,
        "lanes": drawn,
    }


# -- HTML ----------------------------------------------------------------------------------


def evidence_seqs(line: str) -> list[int]:
    found: list[int] = []
    for match in SEQ_MENTION.finditer(line):
        found += [int(number) for number in re.findall(r"\d+", match.group(1))]
    return found


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        # Always on, whatever a template is named: engine stderr, run reports, tool
        # arguments, replies and scenario names all end up in these pages.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":")}
    return environment


def _render(template: str, **context: Any) -> str:
    try:
        return (
            _environment()
            .get_template(template)
            .render(
                css=markupsafe.Markup(_asset("timeline.css")),  # ours, shipped with the package
                js=markupsafe.Markup(_asset("timeline.js")),
                **context,
            )
        )
    except jinja2.TemplateNotFound as error:
        raise errors.CrashcertError(f"report template {error.name} missing") from None


def _asset(name: str) -> str:
    try:
        return (TEMPLATES / name).read_text()
    except OSError as error:
        raise errors.CrashcertError(f"report template {name} missing: {error}") from None


@dataclasses.dataclass(frozen=True)
class _Result:
    result: verdict_module.CheckResult
    failing: bool
    evidence: list[tuple[str, str]]  # each line, and the seq numbers it names


@dataclasses.dataclass(frozen=True)
class _Section:
    """What templates/macros.html's trial_section draws of one trial."""

    view: TrialView
    heading: str
    page_link: str | None
    facts: list[tuple[str, str]]
    data: dict[str, Any] | None  # None: the timeline is on the trial's own page only
    results: list[_Result]

    @property
    def open(self) -> bool:  # in the matrix page, a trial that did not pass starts unfolded
        return self.view.verdict is not verdict_module.Verdict.PASS


def _section(view: TrialView, *, heading_level: int = 2, page_link: str | None = None) -> _Section:
    trial = view.history
    report = trial.final_report
    status = report.status if report else "unknown"
    facts = [
        ("scenario", trial.scenario.name),
        ("plan", view.label),
        ("engine", trial.engine),
        ("run", f"{trial.run_id} ({trial.run_key})"),
        ("final status", status + (f" ({report.reason})" if report and report.reason else "")),
        ("seed", str(trial.seed)),
        ("duration", f"{trial.ended_at - trial.started_at:.3f}s"),
    ]
    if view.directory is not None:
        facts.append(("directory", str(view.directory)))
    if trial.harness_error:
        facts.append(("harness error", trial.harness_error))
    results = [
        _Result(
            result=result,
            failing=result.verdict is not verdict_module.Verdict.PASS,
            evidence=[(line, " ".join(map(str, evidence_seqs(line)))) for line in result.evidence],
        )
        for result in view.results
    ]
    return _Section(
        view=view,
        heading=f"h{heading_level}",
        page_link=page_link,
        facts=facts,
        # a light history's timeline is on its own page only: the matrix page of a large
        # campaign stays small, and its memory flat
        data=None if trial.light else timeline_data(trial),
        results=results,
    )


def trial_page(view: TrialView) -> str:
    title = f"crashcert {view.history.scenario.name} {view.label}: {view.verdict.value}"
    return _render("trial.html", title=title, section=_section(view))


def matrix_page(
    views: list[TrialView],
    *,
    title: str = "crashcert matrix",
    unreached: list[str] | None = None,
    links: dict[str, str] | None = None,
    not_run: dict[str, list[str]] | None = None,
) -> str:
    """The scenario x boundary grid, each cell linking to its trials' sections below.

    `links` maps a trial id to the relative path of its own page, when there is one.
    """
    links = links or {}
    scenarios: list[str] = []
    cells: dict[tuple[str, str], list[TrialView]] = collections.defaultdict(list)
    for view in views:
        name = view.history.scenario.name
        if name not in scenarios:
            scenarios.append(name)
        cells[(name, view.row)].append(view)
    rows = []
    for point in grid.rows(point for _, point in cells):
        row_cells = []
        for name in scenarios:
            items = sorted(cells.get((name, point), []), key=_severity)
            worst = items[0].verdict.value if items else "none"
            row_cells.append({"scenario": name, "worst": worst, "trials": items})
        rows.append({"point": point, "cells": row_cells})
    counts = collections.Counter(view.verdict for view in views)
    summary = ", ".join(f"{counts[v]} {v.value}" for v in verdict_module.SEVERITY if counts[v])
    sections = [
        _section(v, heading_level=3, page_link=links.get(v.history.trial_id))
        for v in sorted(views, key=_severity)
    ]
    return _render(
        "matrix.html",
        title=title,
        overall=_overall(views, [*(unreached or []), *(not_run or {})]),
        count=len(views),
        summary=summary,
        unreached=unreached or [],
        not_run=not_run or {},
        scenarios=scenarios,
        rows=rows,
        sections=sections,
    )


def _severity(view: TrialView) -> int:
    return verdict_module.SEVERITY.index(view.verdict)


def _overall(views: list[TrialView], unreached: list[str] | None) -> verdict_module.Verdict:
    verdicts = [view.verdict for view in views]
    if unreached:
        verdicts.append(verdict_module.Verdict.INCONCLUSIVE)
    return verdict_module.worst(verdicts)


# -- files ---------------------------------------------------------------------------------


def write_trial_page(view: TrialView, directory: pathlib.Path | None = None) -> pathlib.Path:
    target = directory or view.directory
    if target is None:
        raise errors.CrashcertError("a trial page needs a directory to be written to")
    path = target / TRIAL_PAGE
    path.write_text(trial_page(view))
    return path


def write_matrix_report(
    out_dir: pathlib.Path,
    views: list[TrialView],
    *,
    unreached: list[str] | None = None,
    title: str = "crashcert matrix",
    not_run: dict[str, list[str]] | None = None,
) -> pathlib.Path:
    """Each trial's own page in its directory, and the matrix page in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    links: dict[str, str] = {}
    for view in views:
        if view.directory is not None and view.directory.exists():
            # a light view's page was written while its history was whole (matrix.kept)
            page = view.directory / TRIAL_PAGE
            if not view.history.light or not page.exists():
                page = write_trial_page(view)
            try:
                links[view.history.trial_id] = str(page.resolve().relative_to(out_dir.resolve()))
            except ValueError:
                links[view.history.trial_id] = page.resolve().as_uri()
    path = out_dir / MATRIX_PAGE
    html = matrix_page(views, title=title, unreached=unreached, links=links, not_run=not_run)
    path.write_text(html)
    return path


def report_directory(root: pathlib.Path) -> list[pathlib.Path]:
    """`crashcert report DIR`: timeline.html in every trial below DIR; report.html for many."""
    trials = artifacts.find_trials(root)
    views = [load_view(directory) for directory in trials]
    if trials == [root]:
        return [write_trial_page(views[0])]
    matrix = write_matrix_report(root, views, title=f"crashcert report: {root.name}")
    return [*(view.directory / TRIAL_PAGE for view in views if view.directory), matrix]
