"""The timeline report in a real headless browser: lanes, faults, verdicts, evidence, repro."""

from __future__ import annotations

import pathlib

import click.testing

from harness import checkers
from harness.checkers import verdict as verdict_module
from harness.cli import main
from harness.faults import spec
from harness.record import history
from harness.report import timeline
from harness.trial import artifacts
from tests.checkers import builders
from tests.report.timeline import chromium

REPRO = "crashcert run --engine reference --scenario refund --fault 'kill@tool.returned#2' --seed 0"


def duplicate_refund() -> history.TrialHistory:
    """w-1 refunds, dies before recording it (kill at tool.returned); w-2 refunds again."""
    trial = builders.first_round(builders.Trial())
    trial.model_turn(1)
    trial.start_tool("call_refund")
    trial.tool_request("call_refund")
    returned = trial.hit("tool.returned", tool_call_id="call_refund")
    builders.kill(trial, returned)
    trial.claim("w-2")
    trial.start_tool("call_refund")
    trial.finish_tool("call_refund")
    trial.close_round()
    builders.last_turn(trial)
    built = trial.build()
    plan = [spec.FaultStep(action="kill", point="tool.returned", occurrence=2)]
    return built.model_copy(update={"plan": plan, "trial_id": "t-dup"})


def view(trial: history.TrialHistory, repro: str = REPRO) -> timeline.TrialView:
    results = checkers.check_all(trial)
    return timeline.TrialView(
        history=trial,
        results=results,
        verdict=checkers.trial_verdict(trial, results),
        repro=repro,
    )


def test_trial_page_in_chromium(tmp_path: pathlib.Path) -> None:
    failing = view(duplicate_refund())
    assert failing.verdict is verdict_module.Verdict.FAIL
    page = tmp_path / "timeline.html"
    page.write_text(timeline.trial_page(failing))

    dom = chromium.parse(chromium.dump_dom(page))

    body = dom.find("body")[0]
    assert body.attrs.get("data-rendered") == "true", "the page's script did not finish"
    assert not dom.find(None, "render-error")
    [section] = dom.find("section", "trial", data_trial="t-dup")
    assert section.attrs["data-verdict"] == "FAIL"
    assert section.attrs.get("data-rendered") == "true"
    lanes = {lane.attrs["data-lane"]: lane for lane in section.find("g", "lane")}
    assert {"worker:w-1", "worker:w-2", "model", "tools", "effects", "deliveries"} <= set(lanes)
    # The kill is drawn in the lane of the worker it struck, labelled, with its tooltip.
    [kill] = lanes["worker:w-1"].find("g", "event", "fault", "kill")
    assert "kill@tool.returned#2" in kill.find("title")[0].all_text()
    assert not lanes["worker:w-2"].find(None, "fault")
    assert len(lanes["worker:w-1"].find("g", "event", "boundary")) > 5
    assert lanes["worker:w-2"].find("g", "event", "boundary", data_label="run.claimed#2")
    # Two refunds happened in the world: two effects in the effects lane.
    effects = lanes["effects"].find("g", "event", "effect")
    assert len(effects) == 3  # the lookup once, the refund twice
    refund_seqs = {e.attrs["data-seq"] for e in effects if "refund_order" in e.attrs["data-label"]}
    assert len(refund_seqs) == 2
    assert len(lanes["deliveries"].find("g", "event", "delivery")) == 1
    # The failing invariant is highlighted and its evidence points at those effects.
    [row] = section.find("tr", "invariant", data_invariant="tool.at_most_once")
    assert row.attrs["data-verdict"] == "FAIL" and row.has("failing")
    assert row.find("span", "verdict", "FAIL")
    evidence = row.find("li", "evidence")
    assert evidence and "2 effects in the world" in evidence[0].all_text()
    named = {seq for item in evidence for seq in item.attrs.get("data-seqs", "").split()}
    assert refund_seqs <= named
    passing = section.find("tr", "invariant", data_invariant="reply.single_delivery")
    assert passing[0].attrs["data-verdict"] == "PASS" and not passing[0].has("failing")
    # The one-line reproduction.
    assert section.find("pre", "repro")[0].all_text().strip() == REPRO


def test_matrix_page_links_cells_to_trials(tmp_path: pathlib.Path) -> None:
    clean = builders.clean().model_copy(update={"trial_id": "t-clean"})
    views = [view(clean, "crashcert run --scenario refund"), view(duplicate_refund())]
    page = tmp_path / "report.html"
    page.write_text(timeline.matrix_page(views, unreached=["reply.sent"]))

    dom = chromium.parse(chromium.dump_dom(page))

    assert dom.find("body")[0].attrs.get("data-rendered") == "true"
    [cell] = dom.find("td", "cell", data_scenario="refund", data_point="tool.returned")
    assert cell.has("FAIL")
    [link] = cell.find("a", "trial-link", "verdict", "FAIL")
    target = link.attrs["href"].removeprefix("#")
    [section] = dom.find("section", "trial", id=target)
    assert section.attrs["data-verdict"] == "FAIL" and section.attrs["data-rendered"] == "true"
    [base] = dom.find("td", "cell", data_scenario="refund", data_point="baseline")
    assert base.find("a", "trial-link", "verdict", "PASS")
    assert dom.find("td", "cell", data_scenario="refund", data_point="model.ready")[0].has("none")
    assert "reply.sent" in dom.find("p", "unreached")[0].all_text()
    assert len(dom.find("section", "trial", data_rendered="true")) == 2


def test_report_command_writes_pages_for_stored_trials(tmp_path: pathlib.Path) -> None:
    for trial in (builders.clean(), duplicate_refund()):
        results = checkers.check_all(trial)
        artifacts.write_trial(
            tmp_path / trial.scenario.name / timeline.plan.plan_label(trial.plan),
            trial,
            verdicts=[r.model_dump(mode="json") for r in results],
            verdict=checkers.trial_verdict(trial, results).value,
            repro=REPRO,
        )
    result = click.testing.CliRunner().invoke(main.main, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    pages = sorted(tmp_path.rglob("timeline.html"))
    assert len(pages) == 2
    assert (tmp_path / "report.html").exists()

    dom = chromium.parse(chromium.dump_dom(tmp_path / "report.html"))

    [link] = dom.find("a", "page-link", href="refund/kill@tool.returned#2/timeline.html")
    assert link is not None
    assert 'data-verdict="FAIL"' in pages[1].read_text()
