"""Timeline reports: one self-contained HTML page per trial, and one for a whole matrix.

A page needs no network: CSS and JavaScript (harness/report/templates/timeline.*) are inlined and
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
import html
import json
import pathlib
import re
from typing import Any

from harness import errors
from harness.checkers import verdict as verdict_module
from harness.contract import boundaries
from harness.faults import plan
from harness.report import grid
from harness.trial import artifacts as store
from harness.trial import history
from harness.world import ledger

TRIAL_PAGE = "timeline.html"
MATRIX_PAGE = "report.html"
TEMPLATES = pathlib.Path(__file__).resolve().parent / "templates"
# Numbers that follow "seq" in evidence ("request seq 12", "seq 3, 4") name ledger/event records.
SEQ_MENTION = re.compile(r"\bseq\s+\[?((?:\d+(?:,\s*)?)+)")
# Faults that live in the Postgres lane rather than in the lane of the worker that hit the point.
SERVER_FAULTS = frozenset({"pg_restart", "pg_start"})


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
    trial = store.read_history(directory / "history.jsonl")
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


def _tool_event(entry: ledger.ToolRequest | ledger.ToolEffect | ledger.ToolQuery) -> dict[str, Any]:
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


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _json_script(value: Any) -> str:
    # "</" cannot end the script element early once escaped.
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def evidence_seqs(line: str) -> list[int]:
    found: list[int] = []
    for match in SEQ_MENTION.finditer(line):
        found += [int(number) for number in re.findall(r"\d+", match.group(1))]
    return found


def _verdict_badge(value: verdict_module.Verdict | str) -> str:
    text = str(value)
    return f'<span class="verdict {_e(text)}">{_e(text)}</span>'


def _results_table(view: TrialView) -> str:
    rows = []
    for result in view.results:
        failing = result.verdict is not verdict_module.Verdict.PASS
        evidence = "".join(
            f'<li class="evidence" data-seqs="{" ".join(map(str, evidence_seqs(line)))}">'
            f"{_e(line)}</li>"
            for line in result.evidence
        )
        evidence_list = f'<ul class="evidence-list">{evidence}</ul>' if evidence else ""
        if not failing and evidence:
            evidence_list = f"<details><summary>notes</summary>{evidence_list}</details>"
        rows.append(
            f'<tr class="invariant{" failing" if failing else ""}" '
            f'data-invariant="{_e(result.invariant)}" data-verdict="{_e(result.verdict.value)}">'
            f'<td class="name">{_e(result.invariant)}</td>'
            f"<td>{_verdict_badge(result.verdict)}</td>"
            f'<td><div class="summary">{_e(result.summary)}</div>{evidence_list}</td></tr>'
        )
    return (
        '<table class="verdicts"><thead><tr><th>invariant</th><th>verdict</th>'
        f"<th>summary and evidence</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def trial_section(view: TrialView, *, heading_level: int = 2, page_link: str | None = None) -> str:
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
    facts_html = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    link = f' <a class="page-link" href="{_e(page_link)}">own page</a>' if page_link else ""
    heading = f"h{heading_level}"
    return (
        f'<section class="trial" id="{_e(view.anchor)}" data-trial="{_e(trial.trial_id)}" '
        f'data-scenario="{_e(trial.scenario.name)}" data-plan="{_e(view.label)}" '
        f'data-verdict="{_e(view.verdict.value)}">'
        f"<{heading}>{_e(trial.scenario.name)} · {_e(view.label)} "
        f"{_verdict_badge(view.verdict)}{link}</{heading}>"
        f'<dl class="facts">{facts_html}</dl>'
        f'<div class="repro-box"><span>rerun:</span><pre class="repro"><code>{_e(view.repro)}'
        '</code></pre><button type="button" class="copy">copy</button></div>'
        '<div class="timeline" aria-label="timeline"></div>'
        '<pre class="event-detail" hidden></pre>'
        f'<script type="application/json" class="trial-data">'
        f"{_json_script(timeline_data(trial))}</script>"
        f"{_results_table(view)}</section>"
    )


def _asset(name: str) -> str:
    try:
        return (TEMPLATES / name).read_text()
    except OSError as error:
        raise errors.CrashcertError(f"report template {name} missing: {error}") from None


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_asset('timeline.css')}</style></head>"
        f"<body>{body}<script>{_asset('timeline.js')}</script></body></html>\n"
    )


def trial_page(view: TrialView) -> str:
    title = f"crashcert {view.history.scenario.name} {view.label}: {view.verdict.value}"
    return _page(title, f"<h1>crashcert trial</h1>{trial_section(view)}")


def matrix_page(
    views: list[TrialView],
    *,
    title: str = "crashcert matrix",
    unreached: list[str] | None = None,
    links: dict[str, str] | None = None,
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
        tds = []
        for name in scenarios:
            items = sorted(
                cells.get((name, point), []), key=lambda v: verdict_module.SEVERITY.index(v.verdict)
            )
            inner = " ".join(
                f'<a class="trial-link verdict {_e(v.verdict.value)}" href="#{_e(v.anchor)}" '
                f'title="{_e(v.label)}: {_e(v.verdict.value)}">{_e(v.verdict.value[0])}</a>'
                for v in items
            )
            worst = items[0].verdict.value if items else "none"
            tds.append(
                f'<td class="cell {_e(worst)}" data-scenario="{_e(name)}" data-point="{_e(point)}">'
                f"{inner or '-'}</td>"
            )
        rows.append(f'<tr><th scope="row">{_e(point)}</th>{"".join(tds)}</tr>')
    head = "".join(f'<th scope="col">{_e(name)}</th>' for name in scenarios)
    counts = collections.Counter(view.verdict for view in views)
    overall = _overall(views, unreached)
    summary = ", ".join(f"{counts[v]} {v.value}" for v in verdict_module.SEVERITY if counts[v])
    unreached_html = (
        f'<p class="unreached">{_verdict_badge("INCONCLUSIVE")} declared but never reached by '
        f"any scenario: {_e(', '.join(unreached))}</p>"
        if unreached
        else ""
    )
    ordered = sorted(views, key=lambda v: verdict_module.SEVERITY.index(v.verdict))
    sections = "".join(
        f'<details class="trial-box"{"" if v.verdict is verdict_module.Verdict.PASS else " open"}>'
        f"<summary>{_e(v.history.scenario.name)} · {_e(v.label)} {_verdict_badge(v.verdict)}"
        f"</summary>{trial_section(v, heading_level=3, page_link=links.get(v.history.trial_id))}"
        "</details>"
        for v in ordered
    )
    body = (
        f'<h1>{_e(title)} {_verdict_badge(overall)}</h1><p class="counts">{len(views)} trials: '
        f"{_e(summary)}</p>{unreached_html}"
        '<table class="matrix"><caption>boundary x scenario (click a verdict for its trial)'
        f'</caption><thead><tr><th scope="col">boundary</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table><h2>trials</h2>{sections}"
    )
    return _page(title, body)


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
) -> pathlib.Path:
    """Each trial's own page in its directory, and the matrix page in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    links: dict[str, str] = {}
    for view in views:
        if view.directory is not None and view.directory.exists():
            page = write_trial_page(view)
            try:
                links[view.history.trial_id] = str(page.resolve().relative_to(out_dir.resolve()))
            except ValueError:
                links[view.history.trial_id] = page.resolve().as_uri()
    path = out_dir / MATRIX_PAGE
    path.write_text(matrix_page(views, title=title, unreached=unreached, links=links))
    return path


def report_directory(root: pathlib.Path) -> list[pathlib.Path]:
    """`crashcert report DIR`: timeline.html in every trial below DIR; report.html for many."""
    trials = store.find_trials(root)
    views = [load_view(directory) for directory in trials]
    if trials == [root]:
        return [write_trial_page(views[0])]
    matrix = write_matrix_report(root, views, title=f"crashcert report: {root.name}")
    return [*(view.directory / TRIAL_PAGE for view in views if view.directory), matrix]
