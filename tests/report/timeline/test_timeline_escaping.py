"""Text the engine or the world controls is shown as text: never markup, never template code.

Every such field of a trial carries `<script>alert(1)</script>{{ 7*7 }}` and a script that
would mark the page if it ran; both pages must show each field literally and run nothing.
"""

from __future__ import annotations

import json
import pathlib

from harness.checkers import verdict
from harness.record import history
from harness.report import timeline
from harness.world import ledger
from tests.checkers import builders
from tests.report.timeline import chromium
from tests.report.timeline import test_timeline_browser as pages

HOSTILE = "<script>alert(1)</script>{{ 7*7 }}"
PWN = "<script>document.documentElement.setAttribute('data-pwned','1')</script>"


def marked(field: str) -> str:
    return f"{field}:{HOSTILE}{PWN}"


# Shown as page text (headings, facts, evidence, grid).
TEXT_FIELDS = ("stderr", "scenario", "report-reason", "run-id", "engine")
# Carried in the timeline's JSON and shown by the script (tooltips, event detail).
DATA_FIELDS = ("tool-args", "reply")


def hostile() -> history.TrialHistory:
    clean = builders.clean()
    tools = [
        entry.model_copy(update={"arguments": {"note": marked("tool-args")}})
        if isinstance(entry, ledger.ToolRequest | ledger.ToolEffect)
        else entry
        for entry in clean.tools
    ]
    sink = [
        item.model_copy(update={"content": marked("reply")})
        if isinstance(item, ledger.ReplyDelivery | ledger.ReplyRequest)
        else item
        for item in clean.sink
    ]
    final = clean.reports[-1].model_copy(
        update={"reason": marked("report-reason"), "run_id": marked("run-id")}
    )
    last = clean.events[-1]
    crash = history.WorkerEvent(
        seq=last.seq + 1,
        t=last.t + 0.01,
        event="crashed",
        worker_id="w-9",
        pid=99,
        returncode=1,
        log="workers/w-9.log",
        log_tail=["Traceback (most recent call last):", marked("stderr")],
    )
    return clean.model_copy(
        update={
            # Scenario validation forbids this name today; the page must not rely on it.
            "scenario": clean.scenario.model_copy(update={"name": marked("scenario")}),
            "engine": marked("engine"),
            "run_id": marked("run-id"),  # as the engine's submit answered it
            "trial_id": "t-hostile",
            "tools": tools,
            "sink": sink,
            "reports": [*clean.reports[:-1], final],
            "events": [*clean.events, crash],
        }
    )


def hostile_view() -> timeline.TrialView:
    return pages.view(hostile(), repro="crashcert run --scenario refund")


def trial_page() -> str:
    return timeline.trial_page(hostile_view())


def matrix_page() -> str:
    views = [hostile_view(), pages.view(pages.duplicate_refund())]
    return timeline.matrix_page(views, title=f"report: {HOSTILE}", unreached=[marked("unreached")])


def visible_text(node: chromium.Element) -> str:
    if node.tag == "script":
        return ""
    return node.text + "\n".join(visible_text(child) for child in node.children)


def timeline_titles(dom: chromium.Element) -> str:
    found = []
    for script in dom.find("script", "trial-data"):
        data = json.loads(script.all_text())
        found += [event["title"] for lane in data["lanes"] for event in lane["events"]]
    return "\n".join(found)


def check_page(page: str, *, sections: int, extra: tuple[str, ...] = ()) -> None:
    assert "<script>alert" not in page and "<script>document" not in page
    dom = chromium.parse(page)
    # Ours only: the page's script, and one JSON block per trial.
    assert len(dom.find("script")) == 1 + sections
    text = visible_text(dom)
    for field in (*TEXT_FIELDS, *extra):
        assert marked(field) in text, field  # literal: not markup, {{ 7*7 }} not evaluated
    titles = timeline_titles(dom)
    for field in DATA_FIELDS:
        assert marked(field) in titles, field


def test_trial_page_shows_engine_text_literally() -> None:
    check_page(trial_page(), sections=1)


def test_matrix_page_shows_engine_text_literally() -> None:
    page = matrix_page()
    check_page(page, sections=2, extra=("unreached",))
    dom = chromium.parse(page)
    assert f"report: {HOSTILE}" in dom.find("title")[0].all_text()
    [head] = [th for th in dom.find("th", scope="col") if "scenario:" in th.all_text()]
    assert head.all_text() == marked("scenario")
    [cell] = dom.find("td", "cell", data_scenario=marked("scenario"), data_point="baseline")
    assert cell.find("a", "trial-link", "verdict")


def test_pages_run_none_of_it_in_chromium(tmp_path: pathlib.Path) -> None:
    for name, page, sections in (("trial", trial_page(), 1), ("matrix", matrix_page(), 2)):
        path = tmp_path / f"{name}.html"
        path.write_text(page)
        dom = chromium.parse(chromium.dump_dom(path))
        [root] = dom.find("html")
        assert "data-pwned" not in root.attrs, name
        assert dom.find("body")[0].attrs.get("data-rendered") == "true", name
        assert len(dom.find("section", "trial", data_rendered="true")) == sections
        # The script drew the world's text as text: the tool request's tooltip quotes it.
        titles = "\n".join(title.all_text() for title in dom.find("title"))
        for field in DATA_FIELDS:
            assert marked(field) in titles, (name, field)
        evidence = "\n".join(item.all_text() for item in dom.find("li", "evidence"))
        assert marked("stderr") in evidence, name


def test_verdict_badges_are_still_markup() -> None:
    # Escaping everything must not escape our own markup.
    dom = chromium.parse(trial_page())
    [section] = dom.find("section", "trial")
    assert section.find("span", "verdict", hostile_view().verdict.value)
    assert hostile_view().verdict is not verdict.Verdict.PASS  # a crash was recorded
